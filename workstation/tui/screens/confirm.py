"""The confirmation dialog: what a commit is about to record that the reviewer should know
(checks still running or errored, suggestions that changed), Enter commits, Esc cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["ConfirmScreen"]


class ConfirmScreen(ModalScreen[bool]):
    """``title``, the ``reasons`` (one per line) and the question; dismissed with True
    (Enter) or False (Escape). Nothing else confirms: a stray key never commits."""

    BINDINGS = [
        Binding("enter", "answer(True)", "Confirm"),
        Binding("escape", "answer(False)", "Cancel"),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 90%; max-width: 100; height: auto; max-height: 90%;
                               border: heavy $warning; background: $surface; padding: 0 1; }
    ConfirmScreen #confirm-reasons { height: auto; }
    ConfirmScreen #confirm-question { height: auto; text-style: bold; margin-top: 1; }
    """

    def __init__(self, title: str, reasons: list[str], question: str) -> None:
        super().__init__()
        self.title_text = title
        self.reasons = list(reasons)
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = self.title_text
            yield Static("\n".join(f"• {r}" for r in self.reasons), id="confirm-reasons", markup=False)
            yield Static(f"{self.question}   Enter: yes · Esc: no", id="confirm-question", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
