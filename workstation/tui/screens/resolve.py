"""The resolution dialog: adjudicate an open dispute of this task, citing both sides."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from workstation.review.services import DisputeSummary
from workstation.tui.widgets.resolve_fields import ResolveFields

__all__ = ["ResolveScreen"]


class ResolveScreen(ModalScreen[Any]):
    """Resolve one of the task's open disputes (:class:`DisputeSummary`, oldest first):
    ``1``-``3`` pick the outcome (upheld, overturned, amended; for amended, the values of
    the disputed fields with ``1``-``9``), write the rationale, ``ctrl+s`` commits,
    ``ctrl+n`` moves to the next open dispute, Esc cancels.

    Dismissed with ``(dispute, outcome, fields, rationale)`` or None."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Commit resolution"),
        Binding("ctrl+n", "next_dispute", "Other dispute"),
    ]
    DEFAULT_CSS = """
    ResolveScreen { align: center middle; }
    ResolveScreen > Vertical { width: 95%; max-width: 110; height: auto; max-height: 95%;
                               border: round $warning; background: $surface; padding: 0 1; }
    ResolveScreen TextArea { height: 5; }
    ResolveScreen #resolve-head, ResolveScreen #resolve-status { height: auto; }
    """

    def __init__(self, task_id: str, disputes: list[DisputeSummary], rubric: Any) -> None:
        super().__init__()
        self.task_id = task_id
        self.disputes = list(disputes)
        self.rubric = rubric
        self.di = 0

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Resolve a dispute on {self.task_id}"
            yield Static("", id="resolve-head", markup=False)
            yield ResolveFields(self.rubric, self.disputes[0])
            yield Static("Rationale (required; cite both sides):", markup=False)
            yield TextArea(id="resolve-rationale", soft_wrap=True)
            yield Static("1-3 outcome · ↑/↓ row · Enter next · ctrl+s commit · ctrl+n other dispute · Esc cancel",
                         id="resolve-status", markup=False)

    def on_mount(self) -> None:
        self._head()
        self.query_one(ResolveFields).focus()

    def _head(self) -> None:
        d = self.disputes[self.di]
        self.query_one("#resolve-head", Static).update(
            f"dispute {d.dispute_id[:8]} by {d.disputer} at {d.timestamp:%Y-%m-%d %H:%M}Z of verdict "
            f"{d.verdict_id[:8]} by {d.verdict_reviewer}  ({self.di + 1}/{len(self.disputes)})\n"
            f"disputer's rationale: {d.rationale}")

    def action_next_dispute(self) -> None:
        self.di = (self.di + 1) % len(self.disputes)
        self.query_one(ResolveFields).set_dispute(self.disputes[self.di])
        self._head()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        form = self.query_one(ResolveFields)
        rationale = self.query_one("#resolve-rationale", TextArea).text
        problems = []
        if form.outcome is None:
            problems.append("pick an outcome (1 upheld, 2 overturned, 3 amended)")
        elif form.outcome == "amended" and not form.values:
            problems.append("amended: pick your value for at least one disputed field")
        if not rationale.strip():
            problems.append("a resolution needs a rationale")
        if problems:
            self.query_one("#resolve-status", Static).update("; ".join(problems))
            return
        self.dismiss((self.disputes[self.di], form.outcome, dict(form.values), rationale))
