"""SpecPanel: the task's spec, or its history of verdicts, disputes and resolutions."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.widgets import ContentSwitcher, Static

from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.scroll_pane import ScrollPane

__all__ = ["SpecPanel"]


class SpecPanel(Panel):
    """The task's spec (Markdown) or, switched with the History key, the task's history
    of verdicts, disputes and resolutions."""

    history_text = ""

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="spec-scroll"):
            with ScrollPane(id="spec-scroll"):
                # Rich's Markdown in one Static: Textual's Markdown widget mounts a widget
                # per block, which costs a few hundred ms on the way to the first paint
                yield Static("loading the spec…", id="spec-md", markup=False)
            with ScrollPane(id="history-scroll"):
                yield Static("loading the history…", id="history-text", markup=False)

    def show(self, which: str) -> None:
        sw = self.query_one(ContentSwitcher)
        sw.current = "history-scroll" if which == "history" else "spec-scroll"
        self.border_title = "History" if which == "history" else self.base_title
        self.screen.set_focus(self.query_one(f"#{sw.current}"))

    @property
    def showing(self) -> str:
        return "history" if self.query_one(ContentSwitcher).current == "history-scroll" else "spec"

    @staticmethod
    def spec_renderable(text: str) -> Any:
        """The spec's Markdown renderable (parsing it is the costly part: a worker may
        build it and hand it to :meth:`set_spec`)."""
        from rich.markdown import Markdown as RichMarkdown

        return RichMarkdown(text, code_theme="ansi_dark", hyperlinks=False)

    def set_spec(self, text: str, renderable: Any = None) -> None:
        """Show spec ``text`` (``renderable``: its :meth:`spec_renderable`, when built already)."""
        self.query_one("#spec-md", Static).update(renderable if renderable is not None else self.spec_renderable(text))

    def set_history(self, text: str) -> None:
        self.history_text = text
        self.query_one("#history-text", Static).update(text)
