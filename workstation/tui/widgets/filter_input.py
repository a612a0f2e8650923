"""FilterInput: the queue screen's filter line."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from workstation.tui.widgets.queue_table import QueueTable

__all__ = ["FilterInput"]


class FilterInput(Input):
    """The filter line; Escape (or Enter) returns to the table."""

    BINDINGS = [Binding("escape", "leave", "Back to the table", show=False)]
    EARLY_KEYS = ("escape",)  # resolved when read (KwsApp.on_event): keys after it go to the new focus

    def action_leave(self) -> None:
        self.screen.set_focus(self.screen.query_one(QueueTable))
