"""ChecksPanel: the checks of the run filling in live, and the selected finding's evidence.

Keys (the keymap's ``checks`` and ``evidence`` scopes): ↑/↓ choose a check or finding,
space / page down scroll its evidence, Enter moves into the evidence (every line of it,
the repro command included, scrolls there) and Esc comes back, ``m`` marks a finding for
the rationale, ``r`` re-runs the check.
"""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from workstation.review.evidence import evidence_lines
from workstation.review.session import ReviewSession
from workstation.tui.keymap import bindings_for
from workstation.tui.widgets.checks_list import ChecksList
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.scroll_pane import ScrollPane
from workstation.tui.widgets.text import fit, label_grid, set_static

__all__ = ["ChecksPanel", "EvidencePane"]


class EvidencePane(ScrollPane):
    """The evidence of the finding under the cursor; focused (Enter on the list), it
    scrolls line by line and Esc returns to the list."""

    BINDINGS = [*bindings_for("scroll"), *bindings_for("evidence")]
    EARLY_KEYS = ("escape",)

    def action_leave(self) -> None:
        self.screen.set_focus(self.screen.query_one(ChecksList))


class ChecksPanel(Panel):
    """Each check as a row (status, time), filling in live; the evidence of the selected
    finding (or the selected check's summary) below."""

    DEFAULT_CSS = """
    ChecksPanel #evidence { height: 50%; min-height: 7; border-top: solid $panel-lighten-2; }
    ChecksPanel ChecksList { height: 1fr; min-height: 3; }
    """
    BINDINGS = [b for b in bindings_for("checks") if b.id in (
        "checks.mark", "checks.rerun", "checks.open", "checks.page_down", "checks.page_up")]

    class Rerun(Message):
        """Re-run one check."""

        def __init__(self, check: str) -> None:
            super().__init__()
            self.check = check

    class Selected(Message):
        """The cursor is on a finding (``finding`` None: on a check row)."""

        def __init__(self, check: str, finding: dict[str, Any] | None) -> None:
            super().__init__()
            self.check = check
            self.finding = finding

    def compose(self) -> ComposeResult:
        yield Static("", classes="panel-status", id="checks-status", markup=False)
        yield ChecksList(id="checks-list")
        with EvidencePane(id="evidence"):
            yield Static("Select a finding to see its evidence.", id="evidence-text", markup=False)

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None
        self.set_interval(0.5, self._tick)

    @property
    def checks_list(self) -> ChecksList:
        return self.query_one(ChecksList)

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh_checks()

    def refresh_checks(self) -> None:
        s = self.session
        if s is None:
            return
        lst = self.checks_list
        if s.error and not s.rows:
            lst.message = f"checks could not run: {s.error}"
        lst.set_checks(list(s.rows.values()))
        self._status()
        self._show_current()

    def _status(self) -> None:
        s = self.session
        if s is None:
            return
        c = s.counts()
        done = sum(v for k, v in c.items() if k not in ("queued", "running"))
        total = len(s.rows)
        parts = [f"{done}/{total} done" if total else "waiting for the runner"]
        for k in ("fail", "warn", "error", "skip"):
            if c.get(k):
                parts.append(f"{c[k]} {k}")
        if s.running and s.run_started:
            parts.append(f"{time.monotonic() - s.run_started:.0f}s")
        elif s.run_seconds is not None:
            parts.append(f"in {s.run_seconds:.1f}s")
        if s.device:
            parts.append(s.device)
        if s.source == "stored":  # the draft's own finished run of this version, not a new one
            parts.insert(0, "stored run (R re-runs)")
        if notice := s.plugin_notice():  # a broken kws.checks plugin: its checks are missing
            parts.insert(0, notice)
        set_static(self.query_one("#checks-status", Static), fit(" · ".join(parts), max(1, self.size.width)))

    def on_resize(self) -> None:
        self._status()

    def _tick(self) -> None:
        if self.session is not None and self.session.running:
            self._status()
            self.checks_list.refresh()

    def on_cursor_list_cursor_moved(self, event: ChecksList.CursorMoved) -> None:
        if event.list is self.checks_list:
            event.stop()
            self._show_current()

    def _show_current(self) -> None:
        lst = self.checks_list
        e = lst.current
        box = self.query_one("#evidence-text", Static)
        if e is None:
            set_static(box, "Select a finding to see its evidence.")
            return
        f = lst.finding_at(e)
        if f is None:
            row = lst.row_of(e.check)
            if row is None:
                return
            lines = [("check", row.check), ("status", row.status)]
            if row.seconds is not None and row.done:
                lines.append(("time", f"{row.seconds:.2f} s"))
            if row.reason:
                lines.append(("reason", row.reason))
            lines.append(("findings", str(len(row.findings)) + (" (↓ to read them)" if row.findings else "")))
            set_static(box, label_grid(lines), key=("check", tuple(lines)))
            self.post_message(self.Selected(row.check, None))
            return
        ev = evidence_lines(f)
        before = getattr(box, "_kws_key", None)
        set_static(box, label_grid(ev), key=("finding", tuple(ev)))
        if getattr(box, "_kws_key", None) != before:
            self.evidence.scroll_home(animate=False)  # a new finding's evidence reads from its top
        self.post_message(self.Selected(e.check, f))

    def selected_findings(self) -> list[dict[str, Any]]:
        """The marked findings, else the one under the cursor."""
        lst = self.checks_list
        out = []
        for e in lst.entries:
            if e.finding is not None and (e.check, e.finding) in lst.marked:
                f = lst.finding_at(e)
                if f is not None:
                    out.append(f)
        if not out and lst.current is not None:
            f = lst.finding_at(lst.current)
            if f is not None:
                out.append(f)
        return out

    @property
    def evidence(self) -> EvidencePane:
        return self.query_one(EvidencePane)

    def action_open_evidence(self) -> None:
        """Move into the evidence pane (scroll it line by line; Esc comes back)."""
        self.screen.set_focus(self.evidence)

    def action_page_evidence(self, pages: int) -> None:
        """Scroll the evidence by ``pages`` pages, the cursor staying on the finding; at the
        end, space goes back to the top (so one key reads it all, round and round)."""
        ev = self.evidence
        if pages > 0 and ev.scroll_y >= ev.max_scroll_y:
            ev.scroll_home(animate=False)
        elif pages > 0:
            ev.scroll_page_down(animate=False)
        else:
            ev.scroll_page_up(animate=False)

    def action_mark(self) -> None:
        lst = self.checks_list
        e = lst.current
        if e is None or e.finding is None:
            self.app.bell()
            return
        key = (e.check, e.finding)
        lst.marked ^= {key}
        lst.refresh()
        lst.action_cursor(1)

    def action_rerun(self) -> None:
        e = self.checks_list.current
        if e is not None:
            self.post_message(self.Rerun(e.check))
