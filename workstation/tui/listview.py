"""Virtualised list widgets (Textual's Line API): only the rows on screen are rendered, so
a queue of thousands of tasks paints as fast as one of ten.

- :class:`CursorList`: a focusable list with a cursor row and fixed header lines;
- :class:`QueueTable`: the queue screen's table of tasks;
- :class:`ChecksList`: the checks panel's rows (a check, then its findings).

Colour is never the only signal: the cursor row is drawn in reverse video and every
status has a word or glyph, so the lists read the same with ``NO_COLOR``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workstation.review.queueview import QueueRow
from workstation.review.session import CheckRow
from workstation.tui.keymap import bindings_for


def fit(text: str, width: int) -> str:
    """``text`` cut (with "…") or padded with spaces to exactly ``width`` cells."""
    if width <= 0:
        return ""
    n = cell_len(text)
    if n <= width:
        return text + " " * (width - n)
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…" + " " * (width - 1 - used)


class CursorList(ScrollView, can_focus=True, inherit_bindings=False):
    """A list with a cursor. Subclasses implement :meth:`row_count`, :meth:`render_row`
    and optionally :meth:`render_header` (``header_lines`` fixed lines on top)."""

    DEFAULT_CSS = """
    CursorList { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    """
    COMPONENT_CLASSES = {"cursorlist--cursor", "cursorlist--header", "cursorlist--dim"}

    cursor: reactive[int] = reactive(0, always_update=True)
    header_lines = 0

    class CursorMoved(Message):
        """The cursor moved to ``index``."""

        def __init__(self, sender: CursorList, index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

        @property
        def control(self) -> CursorList:
            return self.list

    def row_count(self) -> int:
        return 0

    def render_row(self, index: int, width: int, selected: bool) -> Strip:
        return Strip.blank(width, self.rich_style)

    def render_header(self, y: int, width: int) -> Strip:
        return Strip.blank(width, self.rich_style)

    # -- geometry ------------------------------------------------------------------------

    def refresh_rows(self) -> None:
        """Call after the rows changed: resizes, clamps the cursor and repaints."""
        n = self.row_count()
        self.virtual_size = Size(self.size.width, n + self.header_lines)
        if n and self.cursor >= n:
            self.cursor = n - 1
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, self.row_count() + self.header_lines)

    @property
    def page_rows(self) -> int:
        return max(1, self.size.height - self.header_lines)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y < self.header_lines:
            strip = self.render_header(y, width)
        else:
            index = int(self.scroll_offset.y) + y - self.header_lines
            if index >= self.row_count():
                return Strip.blank(width, self.rich_style)
            strip = self.render_row(index, width, index == self.cursor).crop(0, width)
        # every segment gets the widget's base style (line filters such as NO_COLOR's
        # monochrome filter need a style on each segment)
        return strip.apply_style(self.rich_style)

    def watch_cursor(self, old: int, new: int) -> None:
        n = self.row_count()
        if n == 0:
            return
        if new < 0 or new >= n:
            self.cursor = min(max(new, 0), n - 1)
            return
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + self.page_rows:
            self.scroll_to(y=new - self.page_rows + 1, animate=False)
        self.refresh()
        self.post_message(self.CursorMoved(self, new))

    # -- actions (bound by subclasses) -----------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        if self.row_count():
            self.cursor = min(max(self.cursor + delta, 0), self.row_count() - 1)

    def action_cursor_down(self) -> None:
        self.action_cursor(1)

    def action_cursor_up(self) -> None:
        self.action_cursor(-1)

    def action_page_down(self) -> None:
        self.action_cursor(self.page_rows)

    def action_page_up(self) -> None:
        self.action_cursor(-self.page_rows)

    def action_cursor_top(self) -> None:
        self.cursor = 0

    def action_cursor_bottom(self) -> None:
        self.cursor = max(0, self.row_count() - 1)

    def on_click(self, event: Any) -> None:
        y = event.y - self.header_lines
        if y >= 0:
            index = int(self.scroll_offset.y) + y
            if index < self.row_count():
                self.cursor = index

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)


# ------------------------------------------------------------------------------------------
# the queue table


@dataclass(frozen=True)
class _Col:
    title: str
    width: int


class QueueTable(CursorList):
    """The tasks of the queue: id, kind, backend, claimed status, reserved-by, open
    disputes, my verdict, title. Column widths follow the terminal width (the title
    column takes what is left and disappears first on narrow terminals)."""

    DEFAULT_CSS = """
    QueueTable { height: 1fr; }
    QueueTable > .cursorlist--cursor { text-style: reverse bold; }
    QueueTable > .cursorlist--header { text-style: bold underline; }
    QueueTable > .cursorlist--dim { text-style: dim; }
    """
    header_lines = 1

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[QueueRow] = []
        self._id_width = 8
        self._columns: tuple[int, list[_Col]] | None = None

    def set_rows(self, rows: list[QueueRow], keep: str | None = None) -> None:
        """Show ``rows``; the cursor stays on task ``keep`` (by id) when it is still shown."""
        self.rows = rows
        self._id_width = max([8] + [cell_len(r.id) for r in rows])
        self._columns = None
        if keep is not None:
            for i, r in enumerate(rows):
                if r.id == keep:
                    self.cursor = i
                    break
        self.refresh_rows()

    @property
    def current(self) -> QueueRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def row_count(self) -> int:
        return len(self.rows)

    def columns(self, width: int) -> list[_Col]:
        """The columns at ``width`` cells (cached until the rows or the width change)."""
        if self._columns is not None and self._columns[0] == width:
            return self._columns[1]
        cols = self._layout(width)
        self._columns = (width, cols)
        return cols

    def _layout(self, width: int) -> list[_Col]:
        idw = min(34, self._id_width + 1)
        cols = [_Col("", 2), _Col("task", idw + 1), _Col("kind", 13), _Col("backend", 8),
                _Col("claims", 20), _Col("reserved by", 14), _Col("disp", 5), _Col("my verdict", 12)]
        used = sum(c.width for c in cols)
        if width - used >= 12:
            cols.append(_Col("title", width - used))
        elif width < used:
            # narrow terminal: shrink claims and reserved first, then kind
            over = used - width
            for name, floor in (("claims", 11), ("reserved by", 9), ("task", 18), ("kind", 11)):
                for i, c in enumerate(cols):
                    if c.title == name and over > 0:
                        cut = min(over, c.width - floor)
                        cols[i] = _Col(c.title, c.width - cut)
                        over -= cut
        return cols

    def render_header(self, y: int, width: int) -> Strip:
        cols = self.columns(width)
        text = "".join(fit(c.title, c.width - 1) + " " for c in cols)
        return Strip([Segment(fit(text, width), self._style("cursorlist--header"))])

    def render_row(self, index: int, width: int, selected: bool) -> Strip:
        r = self.rows[index]
        s = r.summary
        mark = "▶" if selected else ("✎" if r.has_draft else " ")
        if not s.validated:
            mark = "…" if not selected else "▶"
        cells = {
            "": mark,
            "task": s.id,
            "kind": s.kind,
            "backend": s.backend,
            "claims": r.claimed_label,
            "reserved by": ("me" if r.reserved_by_me else r.reserved_by) or "-",
            "disp": f"⚑{r.open_disputes}" if r.open_disputes else "-",
            "my verdict": r.mine or "-",
            "title": s.title,
        }
        text = "".join(fit(cells[c.title], c.width - 1) + " " for c in self.columns(width))
        style = self._style("cursorlist--cursor") if selected else Style()
        return Strip([Segment(fit(text, width), style)])


# ------------------------------------------------------------------------------------------
# the checks list

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
    BINDINGS = [b for b in bindings_for("checks") if b.id in ("checks.down", "checks.up")] + [
        Binding("pagedown", "page_down", show=False), Binding("pageup", "page_up", show=False),
        Binding("home", "cursor_top", show=False), Binding("end", "cursor_bottom", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.checks: list[CheckRow] = []
        self.entries: list[ChecksEntry] = []
        self.marked: set[tuple[str, int]] = set()
        self.message = "starting the check runner…"

    def set_checks(self, rows: list[CheckRow]) -> None:
        """Show ``rows``, the ones that need the reviewer first (fail, error, warn), then
        the rest in report order; the cursor stays on the same check or finding."""
        keep = self.entries[self.cursor] if 0 <= self.cursor < len(self.entries) else None
        self.checks = sorted(rows, key=lambda r: _ATTENTION.get(r.status, 3))
        self.entries = []
        for r in self.checks:
            self.entries.append(ChecksEntry(r.check))
            for i, _f in enumerate(_ordered(r.findings)):
                self.entries.append(ChecksEntry(r.check, i))
        if keep is not None and keep in self.entries:
            self.set_reactive(CursorList.cursor, self.entries.index(keep))
        self.refresh_rows()

    def row_of(self, check: str) -> CheckRow | None:
        return next((r for r in self.checks if r.check == check), None)

    def finding_at(self, entry: ChecksEntry) -> dict[str, Any] | None:
        row = self.row_of(entry.check)
        if row is None or entry.finding is None:
            return None
        fs = _ordered(row.findings)
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
            head = f"{'▶' if selected else ' '}{glyph} {word:<7}"
            body = f"{row.check:<19}{secs} {counts}"
            if row.status in ("skip", "error") and row.reason:
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


def _ordered(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rank = {"fail": 0, "warn": 1, "info": 2}
    return sorted(findings, key=lambda f: rank.get(f.get("severity"), 3))


def _finding_counts(findings: list[dict[str, Any]]) -> str:
    n = {"fail": 0, "warn": 0, "info": 0}
    for f in findings:
        if f.get("severity") in n:
            n[f["severity"]] += 1
    parts = [f"{v} {k}" for k, v in n.items() if v]
    return ", ".join(parts)
