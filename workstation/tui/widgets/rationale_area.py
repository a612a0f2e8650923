"""RationaleArea: the rubric panel's rationale editor."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import TextArea

__all__ = ["RationaleArea"]


class RationaleArea(TextArea):
    """The rationale editor; Escape returns to the rubric fields."""

    BINDINGS = [Binding("escape", "leave", "Back to the fields", show=False)]
    EARLY_KEYS = ("escape",)  # resolved when read (KwsApp.on_event): keys after it go to the new focus

    def action_leave(self) -> None:
        form = self.screen.query("RubricForm")
        if form:
            self.screen.set_focus(form.first())
