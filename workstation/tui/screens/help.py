"""The help screen: the key grammar, every action with its active keys (the same actions
the command palette offers by name), the dialogs' keys, the rubric's values by number and
the keymap files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from workstation.review.selfcheck_figure import figure_text
from workstation.tui.keymap import ACTIONS, key_display, user_keymap_path
from workstation.tui.widgets.scroll_pane import ScrollPane

__all__ = ["HelpScreen"]

_SCOPES = {
    "app": "Everywhere", "queue": "Queue screen", "review": "Review screen (any panel)",
    "diff": "Source panel", "checks": "Checks panel", "evidence": "Evidence (Enter on a finding)",
    "scroll": "Scrolling panes (spec, history, timing, evidence, views)", "rubric": "Rubric form",
}
#: the grammar in one line per key (docs/tui.md, "Key grammar").
GRAMMAR = (
    ("Enter", "confirm: open the task, read a finding's evidence, keep a field's value (kws's when empty)"),
    ("1-9", "pick the nth value of the focused rubric field (worst first), then the next field"),
    ("alt+1..7", "show panel 1 Spec, 2 Source, 3 Checks, 4 Timing, 5 Rubric, 6 History, 7 Profile (tab cycles)"),
    ("space", "page down the pane you read (source, evidence, spec, timing, history)"),
    ("Esc", "back: out of the evidence, a maximised panel, the review screen, a dialog"),
    ("{commit}", "commit the verdict (dialogs: ctrl+s commits a dispute or a resolution); asks first when "
                 "the report is not final"),
)
#: the dialogs' fixed keys.
DIALOGS = (
    ("Commit confirmation", "Enter commits, Esc cancels"),
    ("Dispute", "1-9 your value of the focused field, ↑/↓ field, Enter next, tab to the rationale, "
                "ctrl+s commit, ctrl+n other verdict, Esc cancel"),
    ("Resolve", "1-3 outcome (upheld, overturned, amended), 1-9 amended values, ↑/↓ row, Enter next, "
                "ctrl+s commit, ctrl+n other dispute, Esc cancel"),
    ("Help, report, calibration views", "scroll keys, Esc closes"),
    ("Command palette (ctrl+p)", "type part of an action's name, Enter runs it, Esc closes"),
)

if TYPE_CHECKING:
    from textual import getters

    from workstation.tui.app import KwsApp


class HelpScreen(ModalScreen[None]):
    """Every action with its active keys, the rubric's value keys and the keymap files."""

    if TYPE_CHECKING:  # typed as the kws app; at run time Textual's own property (tui.app imports this module)
        app = getters.app(KwsApp)
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > ScrollPane { width: 90%; max-width: 110; height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with ScrollPane() as vs:
            vs.border_title = "Keys (Esc closes)" + (f" · {self.app.sandbox_marker}" if self.app.sandbox_marker else "")
            yield Static(self._render_help(), id="help-text")

    def on_mount(self) -> None:
        self.query_one(ScrollPane).focus()

    def _render_help(self) -> Any:
        from rich.console import Group

        app = self.app
        load = app.keymap_load
        parts: list[Any] = [
            Text(f"keymap: {load.name}; files: {', '.join(str(p) for p in load.files) or 'built-in'}"),
            Text(f"user keymap file: {user_keymap_path()} (binding id = keys; see docs/tui.md)", style="dim"),
            Text(f"selfcheck: {figure_text()}", style="dim"),
        ]
        parts += [Text(f"ignored: {p}", style="bold") for p in load.problems]

        def table() -> Table:
            # keys never wrap; what they do wraps at the pane's width instead of being cut
            t = Table.grid(padding=(0, 2), expand=True)
            t.add_column(style="bold", no_wrap=True, min_width=16)
            t.add_column(min_width=16, ratio=3, overflow="fold")
            t.add_column(style="dim", ratio=1, overflow="fold")
            return t

        t = table()
        parts += [Text(""), Text("Key grammar (one meaning per key on a screen)", style="bold underline"), t]
        commit = key_display(load.keys.get("review.commit", "ctrl+s"))
        for k, what in GRAMMAR:  # the remappable keys as the keymap binds them now
            t.add_row("  " + k.format(commit=commit), what, "")
        scope = None
        for a in ACTIONS:
            if a.scope != scope:
                scope = a.scope
                t = table()
                parts += [Text(""), Text(_SCOPES.get(scope, scope), style="bold underline"), t]
            t.add_row("  " + key_display(load.keys.get(a.id, a.default)), a.description, a.id)
        t = table()
        parts += [Text(""), Text("Dialogs", style="bold underline"), t]
        for name, keys in DIALOGS:
            t.add_row("  " + name, keys, "")
        t = table()
        parts += [Text(""), Text("Command palette only (ctrl+p)", style="bold underline"), t]
        for name, what in (("Open task: <id>", "open any task"), ("Reserve / Release task: <id>", "on any screen"),
                           ("Resolve a dispute of <id>", "on any screen"), ("Re-run check: <id>", "review screen"),
                           ("Set <field>: <value>", "review screen"), ("Next task reserved by me", "any screen")):
            t.add_row("  " + name, what, "")
        rubric = app.queue.rubric
        if rubric is not None:
            t = table()
            parts += [Text(""), Text(f"Rubric {rubric.id}: values by number on the focused field",
                                     style="bold underline"), t]
            for f in rubric.choice_fields:
                t.add_row("  1-" + str(len(f.values)), f.label,
                          ", ".join(f"{i}={v.value}" for i, v in enumerate(f.values, 1)))
        return Group(*parts)

    async def action_dismiss(self, result: Any = None) -> None:
        self.dismiss(None)
