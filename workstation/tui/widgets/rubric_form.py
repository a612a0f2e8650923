"""RubricForm: the rubric's choice fields with kws's suggestions; value keys pick."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from workstation.review.session import ReviewSession
from workstation.tui.keymap import bindings_for
from workstation.tui.widgets.rationale_area import RationaleArea
from workstation.tui.widgets.text import fit

__all__ = ["RubricForm"]


class RubricForm(Widget, can_focus=True, inherit_bindings=False):
    """The rubric's choice fields, one line each: value, kws's suggestion, and whether
    they agree. On the focused field, the value keys of the rubric pick a value (they take
    precedence over every other binding while the form has focus)."""

    DEFAULT_CSS = """
    RubricForm { height: auto; }
    """
    BINDINGS = bindings_for("rubric")
    cursor: reactive[int] = reactive(0)

    class Changed(Message):
        """The session's values changed through the form."""

    def __init__(self, *, on_change: Callable[[], None] | None = None, **kw: Any) -> None:
        """``on_change`` is called after the form changed a value (same cycle as the key)."""
        super().__init__(**kw)
        self.session: ReviewSession | None = None
        self._on_change = on_change
        self._strip_key: Any = None
        self._strips: list[Strip] = []

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh(layout=True)

    @property
    def fields(self) -> list[Any]:
        return list(self.session.rubric.choice_fields) if self.session else []

    @property
    def current_field(self) -> Any | None:
        fs = self.fields
        return fs[self.cursor] if 0 <= self.cursor < len(fs) else None

    #: lines under the fields: the focused field's keys, then kws's suggestion and why
    DETAIL_LINES = 3

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return max(1, len(self.fields)) + self.DETAIL_LINES

    def _detail(self, width: int, sugg: dict[str, Any]) -> list[Text]:
        """The focused field's value keys and kws's suggestion with the findings behind
        it (the reason names the worst informing finding), in DETAIL_LINES lines."""
        import textwrap

        f = self.current_field
        if f is None:
            return [Text("")] * self.DETAIL_LINES
        out = [Text(fit("  ".join(f"{v.key} {v.label}" for v in f.values), width).rstrip(), style="bold")]
        sg = sugg.get(f.key)
        why = f"kws: {sg.value or '-'} ({sg.outcome})" + (f" — {sg.reason}" if sg.reason else "") if sg else \
            "kws: no suggestion for this field"
        rest = self.DETAIL_LINES - 1
        lines = textwrap.wrap(why, width, break_on_hyphens=False) or [""]
        if len(lines) > rest:
            lines = lines[:rest]
            lines[-1] = fit(lines[-1] + " …", width).rstrip()
        out += [Text(ln, style="dim") for ln in lines + [""] * (rest - len(lines))]
        return out

    def _lines(self, width: int) -> list[Text]:
        s = self.session
        if s is None:
            return [Text("loading the rubric…")]
        sugg = s.suggestions()
        longest = max((len(f.label) for f in self.fields), default=12)
        value_w = 15
        agree_w = 7
        label_w = max(12, min(longest + 1, width - 2 - value_w - agree_w - 20))
        out = []
        for i, f in enumerate(self.fields):
            sel = i == self.cursor and self.has_focus
            v = s.values.get(f.key)
            sg = sugg.get(f.key)
            sv = sg.value if sg is not None else None
            if v and sv and v == sv:
                agree = "= kws"
            elif v and sv:
                agree = "≠ kws"
            elif not v and f.required:
                agree = "needed"
            else:
                agree = ""
            kws = f"kws: {sv}" if sv else ("kws: -" if sg is not None else "")
            line = Text()
            line.append("▶ " if i == self.cursor else "  ", style="bold")
            line.append(fit(f.label, label_w - 1) + " ", style="bold" if sel else "")
            line.append(fit(v or "—", value_w - 1) + " ", style="bold" if v else "dim")
            line.append(fit(agree, agree_w), style="bold" if agree == "≠ kws" else "dim")
            line.append(fit(kws, max(0, width - 2 - label_w - value_w - agree_w)), style="dim")
            if sel:
                line.stylize("reverse")
            out.append(line)
        return out + self._detail(width, sugg)

    def render_line(self, y: int) -> Strip:
        """Line API: the form's lines are built once per change and kept as strips
        (a repaint per keystroke then costs next to nothing)."""
        width = max(20, self.size.width)
        s = self.session
        key = (width, self.cursor, self.has_focus, id(s),
               tuple(sorted(s.values.items())) if s else (), s._version if s else -1)
        if key != self._strip_key:
            console = self.app.console
            self._strips = [Strip(list(t.render(console)), t.cell_len).extend_cell_length(width)
                            .crop(0, width).apply_style(self.rich_style) for t in self._lines(width)]
            self._strip_key = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width, self.rich_style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def watch_cursor(self) -> None:
        self.refresh()

    # value keys: consumed before any binding of the screen or app
    def check_consume_key(self, key: str, character: str | None) -> bool:
        f = self.current_field
        return bool(f is not None and character and len(character) == 1 and f.by_key(character) is not None)

    def handle_key_now(self, event: events.Key) -> bool:
        """A value key of the focused field picks that value (called by the app when it
        reads the key, so picks and the bound keys around them keep their order)."""
        f = self.current_field
        ch = event.character
        if f is None or self.session is None or not ch or len(ch) != 1 or f.by_key(ch) is None:
            return False
        if self.session.pick_by_key(f.key, ch):
            self._changed(advance=True)
        return True

    def on_key(self, event: events.Key) -> None:
        if self.handle_key_now(event):  # keys that reach the form another way (tests, palette)
            event.stop()
            event.prevent_default()

    def _changed(self, advance: bool = False) -> None:
        """After a value change: move on, repaint, and tell the owner (``on_change``) in
        this same cycle (one frame per keystroke; a message would cost a second)."""
        if advance and self.cursor < len(self.fields) - 1:
            self.cursor += 1
        self.refresh()
        if self._on_change is not None:
            self._on_change()

    def action_field(self, delta: int) -> None:
        n = len(self.fields)
        if n:
            self.cursor = min(max(self.cursor + delta, 0), n - 1)

    def action_accept(self) -> None:
        f = self.current_field
        if f is None or self.session is None:
            return
        if self.session.accept_suggestion(f.key) or self.session.values.get(f.key):
            self._changed(advance=True)
        else:
            self.app.bell()
            self.notify(f"kws has no suggestion for {f.label} yet", severity="warning", timeout=3)

    def action_clear(self) -> None:
        f = self.current_field
        if f is not None and self.session is not None and self.session.set_value(f.key, None):
            self._changed()

    def action_edit_rationale(self) -> None:
        area = self.screen.query_one(RationaleArea)
        self.screen.set_focus(area)
        area.move_cursor(area.document.end)  # continue a restored or prefilled rationale
