"""The dispute screen: disagree with fields of a verdict of this task, with a rationale."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from workstation.review.services import VerdictSummary
from workstation.rubric.model import Rubric
from workstation.tui.widgets.dispute_fields import DisputeFields

__all__ = ["DisputeScreen"]


class DisputeScreen(ModalScreen[Any]):
    """Dispute a verdict of this task: pick the fields you disagree with (value keys),
    write the rationale, ctrl+s commits, Esc cancels. Tab cycles verdicts.

    Dismissed with ``(verdict, fields, rationale)`` (the :class:`VerdictSummary`
    disputed, the disputer's values) to commit, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Commit dispute"),
        Binding("ctrl+n", "next_verdict", "Other verdict"),
    ]
    DEFAULT_CSS = """
    DisputeScreen { align: center middle; }
    DisputeScreen > Vertical { width: 90%; max-width: 100; height: auto; max-height: 95%;
                               border: round $warning; background: $surface; padding: 0 1; }
    DisputeScreen TextArea { height: 5; }
    DisputeScreen #dispute-head, DisputeScreen #dispute-status { height: auto; }
    """

    def __init__(self, task_id: str, verdicts: list[VerdictSummary], rubric: Rubric) -> None:
        super().__init__()
        self.task_id = task_id
        self.verdicts = list(reversed(verdicts))  # newest first
        self.rubric = rubric
        self.vi = 0

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Dispute a verdict on {self.task_id}" + (f" · {self.app.sandbox_marker}" if getattr(self.app, "sandbox_marker", "") else "")
            yield Static("", id="dispute-head", markup=False)
            yield DisputeFields(self.rubric, self.verdicts[0])
            yield Static("Rationale (required):", markup=False)
            yield TextArea(id="dispute-rationale", soft_wrap=True)
            yield Static("value keys pick · ↑/↓ field · tab to the rationale · ctrl+s commit · "
                         "ctrl+n other verdict · Esc cancel", id="dispute-status", markup=False)

    def on_mount(self) -> None:
        self._head()
        self.query_one(DisputeFields).focus()

    def _head(self) -> None:
        v = self.verdicts[self.vi]
        self.query_one("#dispute-head", Static).update(
            f"verdict {v.verdict_id[:8]} by {v.reviewer} at {v.timestamp:%Y-%m-%d %H:%M}Z: {v.overall}"
            f"  ({self.vi + 1}/{len(self.verdicts)})")

    def action_next_verdict(self) -> None:
        self.vi = (self.vi + 1) % len(self.verdicts)
        fields = self.query_one(DisputeFields)
        fields.verdict = self.verdicts[self.vi]
        fields.values = {}
        fields.refresh(layout=True)
        self._head()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        fields = self.query_one(DisputeFields).values
        rationale = self.query_one("#dispute-rationale", TextArea).text
        problems = []
        if not fields:
            problems.append("pick at least one field value that differs from the verdict")
        if not rationale.strip():
            problems.append("a dispute needs a rationale")
        if problems:
            self.query_one("#dispute-status", Static).update("; ".join(problems))
            return
        self.dismiss((self.verdicts[self.vi], dict(fields), rationale))
