"""Modal screens: the help screen (the active keys) and the dispute form."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static, TextArea

from workstation.tui.keymap import ACTIONS, key_display, user_keymap_path
from workstation.tui.listview import fit

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
            vs.border_title = "Keys (Esc closes)"
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


class _DisputeFields(Widget, can_focus=True):
    """The verdict's choice fields; value keys pick the disputer's value."""

    DEFAULT_CSS = "_DisputeFields { height: auto; }"
    BINDINGS = [
        Binding("down,j", "move(1)", "Next field", show=False),
        Binding("up,k", "move(-1)", "Previous field", show=False),
        Binding("backspace", "clear", "Clear", show=False),
    ]

    def __init__(self, rubric: Any, verdict: Any) -> None:
        super().__init__()
        self.rubric = rubric
        self.verdict = verdict
        self.cursor = 0
        self.values: dict[str, str] = {}

    @property
    def fields(self) -> list[Any]:
        return list(self.rubric.choice_fields)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.fields) + 1

    def render(self) -> Text:
        out = Text()
        cur = self.verdict.values()
        w = max(20, self.size.width)
        for i, f in enumerate(self.fields):
            sel = i == self.cursor
            mine = self.values.get(f.key)
            line = Text(("▶ " if sel else "  ") + fit(f.label, 26) + fit(f"verdict: {cur.get(f.key, '-')}", 26)
                        + (f"→ {mine}" if mine else ""))
            if sel and self.has_focus:
                line.stylize("reverse")
            out.append_text(line)
            out.append("\n")
        f = self.fields[self.cursor] if self.fields else None
        if f is not None:
            out.append(fit("keys: " + "  ".join(f"{v.key} {v.value}" for v in f.values), w), style="dim")
        return out

    def check_consume_key(self, key: str, character: str | None) -> bool:
        f = self.fields[self.cursor] if self.fields else None
        return bool(f is not None and character and f.by_key(character) is not None)

    def handle_key_now(self, event: events.Key) -> bool:
        """A value key picks the disputer's value for the focused field (see KwsApp.on_event)."""
        f = self.fields[self.cursor] if self.fields else None
        if f is None or not event.character:
            return False
        v = f.by_key(event.character)
        if v is None:
            return False
        if self.verdict.values().get(f.key) == v.value:
            self.values.pop(f.key, None)
        else:
            self.values[f.key] = v.value
        self.refresh(layout=True)
        return True

    def on_key(self, event: events.Key) -> None:
        if self.handle_key_now(event):
            event.stop()

    def action_move(self, d: int) -> None:
        self.cursor = min(max(0, self.cursor + d), len(self.fields) - 1)
        self.refresh()

    def action_clear(self) -> None:
        f = self.fields[self.cursor]
        self.values.pop(f.key, None)
        self.refresh()


class DisputeScreen(ModalScreen[Any]):
    """Dispute a verdict of this task: pick the fields you disagree with (value keys),
    write the rationale, ctrl+s commits, Esc cancels. Tab cycles verdicts."""

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

    def __init__(self, task_id: str, verdicts: list[Any], rubric: Any) -> None:
        super().__init__()
        self.task_id = task_id
        self.verdicts = list(reversed(verdicts))  # newest first
        self.rubric = rubric
        self.vi = 0

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = f"Dispute a verdict on {self.task_id}"
            yield Static("", id="dispute-head", markup=False)
            yield _DisputeFields(self.rubric, self.verdicts[0])
            yield Static("Rationale (required):", markup=False)
            yield TextArea(id="dispute-rationale", soft_wrap=True)
            yield Static("value keys pick · ↑/↓ field · tab to the rationale · ctrl+s commit · "
                         "ctrl+n other verdict · Esc cancel", id="dispute-status", markup=False)

    def on_mount(self) -> None:
        self._head()
        self.query_one(_DisputeFields).focus()

    def _head(self) -> None:
        v = self.verdicts[self.vi]
        self.query_one("#dispute-head", Static).update(
            f"verdict {v.verdict_id[:8]} by {v.reviewer} at {v.timestamp:%Y-%m-%d %H:%M}Z: {v.overall}"
            f"  ({self.vi + 1}/{len(self.verdicts)})")

    def action_next_verdict(self) -> None:
        self.vi = (self.vi + 1) % len(self.verdicts)
        fields = self.query_one(_DisputeFields)
        fields.verdict = self.verdicts[self.vi]
        fields.values = {}
        fields.refresh(layout=True)
        self._head()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        fields = self.query_one(_DisputeFields).values
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
