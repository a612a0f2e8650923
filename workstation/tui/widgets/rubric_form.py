"""RubricForm: the rubric's choice fields with kws's suggestions; 1-9 pick, Enter confirms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
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
    """The rubric's choice fields, one line each: value, whether it agrees with kws's
    suggestion (``= kws``, ``≠ kws``, ``needed``; ``⚑ kws`` when kws's suggestion changed
    after the reviewer accepted it), and the suggestion (``…`` while an informing check
    has not finished, ``(pre-screen)`` when it comes from a stored report). On the
    focused field ``1``-``9`` pick its nth value and move on, Enter confirms it (an empty
    field takes kws's suggestion; a re-flagged one is confirmed as it is) and moves on."""

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
        out = [Text(fit("  ".join(f"{i} {v.label}" for i, v in enumerate(f.values, 1)) + "   Enter confirms",
                        width).rstrip(), style="bold")]
        sg = sugg.get(f.key)
        s = self.session
        why = f"kws: {sg.value or '-'} ({sg.outcome})" + (f" — {sg.reason}" if sg.reason else "") if sg else \
            "kws: no suggestion for this field"
        if s is not None and f.key in s.reflagged:
            why = f"⚑ {s.reflagged[f.key]}"
        elif sg is not None and s is not None and s.provenance(f.key) != "from-complete-run":
            waiting = [r.check for r in s.informing_rows(f.key) if not r.done or r.status == "error"]
            why += (" [pre-screen: stored findings of this task version]" if s.source == "prescreen" else
                    f" [not final: {', '.join(waiting) or 'no result yet'} still running or errored]")
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
            if f.key in s.reflagged:
                agree = "⚑ kws"
            elif v and sv and v == sv:
                agree = "= kws"
            elif v and sv:
                agree = "≠ kws"
            elif not v and f.required:
                agree = "needed"
            else:
                agree = ""
            kws = f"kws: {sv}" if sv else ("kws: -" if sg is not None else "")
            if sg is not None and s.provenance(f.key) == "from-incomplete-run" and s.running:
                kws += "…"
            elif sg is not None and s.source == "prescreen":
                kws += " (pre-screen)"
            line = Text()
            line.append("▶ " if i == self.cursor else "  ", style="bold")
            line.append(fit(f.label, label_w - 1) + " ", style="bold" if sel else "")
            line.append(fit(v or "—", value_w - 1) + " ", style="bold" if v else "dim")
            line.append(fit(agree, agree_w), style="bold" if agree in ("≠ kws", "⚑ kws") else "dim")
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
               tuple(sorted(s.values.items())) if s else (), s._version if s else -1,
               tuple(sorted(s.reflagged.items())) if s else ())
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

    def action_pick(self, n: int) -> None:
        """Pick the focused field's ``n``-th value (1-based) and move to the next field."""
        f = self.current_field
        if f is None or self.session is None:
            return
        if n > len(f.values):
            self.app.bell()
            self.notify(f"{f.label} has {len(f.values)} values (1-{len(f.values)})", severity="warning", timeout=3)
            return
        self.session.pick_nth(f.key, n)
        self._changed(advance=True)

    def set_field(self, key: str, n: int) -> None:
        """Set field ``key`` to its ``n``-th value (the palette's "Set <field>: <value>")."""
        keys = [f.key for f in self.fields]
        if key in keys:
            self.cursor = keys.index(key)
            self.action_pick(n)

    def action_confirm(self) -> None:
        """Enter: keep the focused field's value (an empty one takes kws's suggestion; a
        re-flagged one is confirmed as it is) and move to the next field."""
        f = self.current_field
        if f is None or self.session is None:
            return
        had = self.session.values.get(f.key)
        self.session.confirm_field(f.key)
        if self.session.values.get(f.key):
            self._changed(advance=True)
        elif not had:
            self.app.bell()
            self.notify(f"kws has no suggestion for {f.label} yet: pick one with 1-{len(f.values)}",
                        severity="warning", timeout=3)

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

    def action_field_page(self, direction: int) -> None:
        """Move the field cursor a page (the fields the rubric panel shows at once, at
        least one) down (``direction`` 1) or up (-1)."""
        panel = self.parent
        visible = (panel.size.height if isinstance(panel, Widget) else self.size.height) - self.DETAIL_LINES
        self.action_field(direction * max(1, min(visible, len(self.fields) - 1)))

    def action_field_edge(self, direction: int) -> None:
        """Move the field cursor to the first (``direction`` -1) or last (1) field."""
        if self.fields:
            self.cursor = 0 if direction < 0 else len(self.fields) - 1

    def action_clear(self) -> None:
        f = self.current_field
        if f is not None and self.session is not None and self.session.set_value(f.key, None):
            self._changed()

    def action_edit_rationale(self) -> None:
        area = self.screen.query_one(RationaleArea)
        self.screen.set_focus(area)
        area.move_cursor(area.document.end)  # continue a restored or prefilled rationale
