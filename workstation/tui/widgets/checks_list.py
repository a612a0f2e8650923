"""ChecksList: the checks panel's rows, a check then its findings (a :class:`CursorList`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from workstation.review.evidence import worst_first
from workstation.review.session import CheckRow
from workstation.tui.keymap import bindings_for
from workstation.tui.widgets.cursor_list import CursorList
from workstation.tui.widgets.text import fit

__all__ = ["STATUS_GLYPH", "ChecksEntry", "ChecksList"]

#: a glyph per check status and finding severity (readable without colour).
STATUS_GLYPH = {
    "queued": "·", "running": "…", "pass": "✔", "warn": "▲", "fail": "✘",
    "skip": "–", "error": "!", "info": "i",
}
STATUS_WORD = {"fail": "FAIL", "warn": "WARN", "error": "ERROR"}


@dataclass(frozen=True)
class ChecksEntry:
    """One line of the checks list: a check, or finding ``finding`` of check ``check``."""

    check: str
    finding: int | None = None


class ChecksList(CursorList):
    """Each check as a row (status, id, time, finding count), its findings below it as
    indented rows (severity, summary). Marked findings (for the rationale) show ``●``."""

    DEFAULT_CSS = """
    ChecksList { height: 1fr; }
    ChecksList > .cursorlist--cursor { text-style: reverse; }
    ChecksList > .cursorlist--dim { text-style: dim; }
    ChecksList > .checks--fail { color: $error; text-style: bold; }
    ChecksList > .checks--warn { color: $warning; }
    ChecksList > .checks--pass { color: $success; }
    """
    COMPONENT_CLASSES = CursorList.COMPONENT_CLASSES | {"checks--fail", "checks--warn", "checks--pass"}
    BINDINGS = [b for b in bindings_for("checks") if b.id in (
        "checks.down", "checks.up", "checks.top", "checks.bottom",
        "checks.next_check", "checks.prev_check", "checks.next_fail", "checks.prev_fail")]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.checks: list[CheckRow] = []
        self.entries: list[ChecksEntry] = []
        self.marked: set[tuple[str, int]] = set()
        self.message = "starting the check runner…"

    def set_checks(self, rows: list[CheckRow]) -> None:
        """Show ``rows``, the ones that need the reviewer first (fail, error, warn), then
        the rest in report order. Until the reviewer moves the cursor it follows the first
        fail finding (the top row while there is none), so the evidence pane shows the first
        fail as soon as one is sorted there; afterwards it
        stays on the same check or finding. Either way its row is scrolled into view."""
        keep = self.entries[self.cursor] if 0 <= self.cursor < len(self.entries) else None
        self.checks = sorted(rows, key=lambda r: _ATTENTION.get(r.status, 3))
        self.entries = []
        for r in self.checks:
            self.entries.append(ChecksEntry(r.check))
            for i, _f in enumerate(worst_first(r.findings)):
                self.entries.append(ChecksEntry(r.check, i))
        if not self.user_moved:  # on the first fail finding (its evidence below), else the top row
            first = next((i for i, e in enumerate(self.entries) if e.finding is not None and self.is_fail(e)), 0)
            self.set_reactive(CursorList.cursor, first)
        elif keep is not None and keep in self.entries:
            self.set_reactive(CursorList.cursor, self.entries.index(keep))
        self.refresh_rows()
        self.call_after_refresh(self.scroll_to_cursor)  # once the new virtual size is in place

    def is_fail(self, entry: ChecksEntry) -> bool:
        """A row that needs the reviewer most: a check that failed or errored, or a
        finding of severity fail."""
        if entry.finding is None:
            row = self.row_of(entry.check)
            return row is not None and row.status in ("fail", "error")
        return (self.finding_at(entry) or {}).get("severity") == "fail"

    def action_jump(self, what: str, step: int) -> None:
        """Move the cursor to the next (``step`` 1) or previous (-1) check row
        (``what="check"``: over its findings) or fail row (``"fail"``: :meth:`is_fail`);
        rings the bell and says so when there is none that way (no wrapping)."""
        want = (lambda e: e.finding is None) if what == "check" else self.is_fail
        i = self.cursor + step
        self.user_moved = True
        while 0 <= i < len(self.entries):
            if want(self.entries[i]):
                self.cursor = i
                return
            i += step
        self.app.bell()
        noun = "check" if what == "check" else "fail or error"
        self.notify(f"no {noun} {'below' if step > 0 else 'above'} this row", timeout=2)

    def row_of(self, check: str) -> CheckRow | None:
        return next((r for r in self.checks if r.check == check), None)

    def finding_at(self, entry: ChecksEntry) -> dict[str, Any] | None:
        row = self.row_of(entry.check)
        if row is None or entry.finding is None:
            return None
        fs = worst_first(row.findings)
        return fs[entry.finding] if entry.finding < len(fs) else None

    @property
    def current(self) -> ChecksEntry | None:
        return self.entries[self.cursor] if 0 <= self.cursor < len(self.entries) else None

    def row_count(self) -> int:
        return len(self.entries) if self.entries else 1

    def render_row(self, index: int, width: int, selected: bool) -> Strip:
        if not self.entries:
            return Strip([Segment(fit("  " + self.message, width), self._style("cursorlist--dim"))])
        e = self.entries[index]
        row = self.row_of(e.check)
        assert row is not None
        cur = self._style("cursorlist--cursor") if selected else Style()
        if e.finding is None:
            if row.status == "running" and row.started is not None:
                secs = f"{time.monotonic() - row.started:5.1f}s"
            elif row.seconds is not None and row.done:
                secs = f"{row.seconds:5.1f}s"
            else:
                secs = "     -"
            glyph = STATUS_GLYPH.get(row.status, "?")
            word = STATUS_WORD.get(row.status, row.status)
            counts = _finding_counts(row.findings)
            head = f"{'▶' if selected else ' '}{glyph} {word:<7} "  # "running" fills 7: one space after
            body = f"{row.check:<19}{secs} {counts}"
            if row.not_judged and row.status != "error":  # never read as "nothing to look at"
                body += f"  not judged: {row.not_judged.splitlines()[0]}"
            elif row.status in ("skip", "error") and row.reason:
                body += f"  {row.reason.splitlines()[0]}"
            status_style = self._style(f"checks--{row.status}") if row.status in ("fail", "warn", "pass") else Style()
            return Strip([
                Segment(head, status_style + cur),
                Segment(fit(body, max(0, width - cell_len(head))), cur),
            ])
        f = self.finding_at(e) or {}
        sev = f.get("severity", "?")
        mark = "●" if (e.check, e.finding) in self.marked else " "
        head = f"{'▶' if selected else ' '}  {mark}└ {STATUS_GLYPH.get(sev, '?')} {sev:<4} "
        sev_style = self._style(f"checks--{sev}") if sev in ("fail", "warn") else self._style("cursorlist--dim")
        return Strip([
            Segment(head, sev_style + cur),
            Segment(fit(str(f.get("summary", "")), max(0, width - cell_len(head))), cur),
        ])


_ATTENTION = {"fail": 0, "error": 1, "warn": 2}


def _finding_counts(findings: list[dict[str, Any]]) -> str:
    n = {"fail": 0, "warn": 0, "info": 0}
    for f in findings:
        if f.get("severity") in n:
            n[f["severity"]] += 1
    parts = [f"{v} {k}" for k, v in n.items() if v]
    return ", ".join(parts)
