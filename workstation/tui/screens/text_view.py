"""A read-only view of a long text (the queue's calibration, a task's Markdown report):
scrolls with the keymap's scroll keys, Esc closes."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from workstation.tui.widgets.scroll_pane import ScrollPane

__all__ = ["TextScreen"]


class TextScreen(ModalScreen[None]):
    """``title`` over ``text`` (plain, or Markdown with ``markdown``), scrollable; the
    border names where the CLI writes the same text (``hint``)."""

    BINDINGS = [Binding("escape,q", "close", "Close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > ScrollPane { width: 95%; max-width: 130; height: 92%; border: round $accent;
                              background: $surface; padding: 0 1; }
    """

    def __init__(self, title: str, text: str, *, markdown: bool = False, hint: str = "") -> None:
        super().__init__()
        self.title_text, self.text, self.markdown, self.hint = title, text, markdown, hint

    def compose(self) -> ComposeResult:
        with ScrollPane(id="text-view") as pane:
            pane.border_title = f"{self.title_text} (Esc closes)"
            if self.hint:
                pane.border_subtitle = self.hint
            yield Static(self._content(), id="text-body", markup=False)

    def _content(self) -> Any:
        if self.markdown:
            from rich.markdown import Markdown

            return Markdown(self.text, code_theme="ansi_dark", hyperlinks=False)
        return self.text

    def on_mount(self) -> None:
        self.query_one(ScrollPane).focus()

    def action_close(self) -> None:
        self.dismiss(None)
