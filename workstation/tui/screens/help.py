"""The help screen: every action with its active keys, the rubric's value keys and the
keymap files."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from workstation.tui.keymap import ACTIONS, key_display, user_keymap_path

__all__ = ["HelpScreen"]

_SCOPES = {
    "app": "Everywhere", "queue": "Queue screen", "review": "Review screen",
    "diff": "Source panel", "checks": "Checks panel", "rubric": "Rubric form",
}


class HelpScreen(ModalScreen[None]):
    """Every action with its active keys, the rubric's value keys and the keymap files."""

    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(can_focus=True) as vs:
            vs.border_title = "Keys (Esc closes)" + (f" · {self.app.sandbox_marker}" if getattr(self.app, "sandbox_marker", "") else "")
            yield Static(self._render_help(), id="help-text")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def _render_help(self) -> Any:
        from rich.console import Group

        app = self.app
        load = app.keymap_load
        parts: list[Any] = [
            Text(f"keymap: {load.name}; files: {', '.join(str(p) for p in load.files) or 'built-in'}"),
            Text(f"user keymap file: {user_keymap_path()} (binding id = keys; see docs/tui.md)", style="dim"),
        ]
        parts += [Text(f"ignored: {p}", style="bold") for p in load.problems]

        def table() -> Table:
            t = Table.grid(padding=(0, 2))
            t.add_column(style="bold", no_wrap=True, min_width=16)
            t.add_column(no_wrap=True, min_width=16)
            t.add_column(style="dim")
            return t

        scope, t = None, None
        for a in ACTIONS:
            if a.scope != scope:
                scope = a.scope
                t = table()
                parts += [Text(""), Text(_SCOPES.get(scope, scope), style="bold underline"), t]
            t.add_row("  " + key_display(load.keys.get(a.id, a.default)), a.description, a.id)
        rubric = app.queue.rubric
        if rubric is not None:
            t = table()
            parts += [Text(""), Text(f"Rubric {rubric.id}: value keys on the focused field", style="bold underline"), t]
            for f in rubric.choice_fields:
                t.add_row("  " + " ".join(v.key for v in f.values), f.label,
                          ", ".join(f"{v.key}={v.value}" for v in f.values))
        return Group(*parts)

    async def action_dismiss(self, result: Any = None) -> None:
        self.dismiss(None)
