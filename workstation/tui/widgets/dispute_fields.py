"""DisputeFields: the dispute form's fields, the verdict's value and the disputer's."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from workstation.tui.widgets.text import fit

__all__ = ["DisputeFields"]


class DisputeFields(Widget, can_focus=True):
    """The verdict's choice fields next to the verdict's values
    (:class:`~workstation.review.services.VerdictSummary`); ``1``-``9`` pick the
    disputer's value for the focused field (its nth value; picking the verdict's own
    value clears the pick) and move on, Enter moves on (from the last field to the
    rationale). ``values`` holds the picks."""

    DEFAULT_CSS = "DisputeFields { height: auto; }"
    BINDINGS = [
        Binding("down,j", "move(1)", "Next field", show=False),
        Binding("up,k", "move(-1)", "Previous field", show=False),
        Binding("enter", "confirm", "Next field", show=False),
        Binding("backspace", "clear", "Clear", show=False),
        *(Binding(str(n), f"pick({n})", f"Value {n}", show=False) for n in range(1, 10)),
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
        cur = self.verdict.values
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
            out.append(fit("keys: " + "  ".join(f"{i} {v.value}" for i, v in enumerate(f.values, 1))
                           + "  Enter next", w), style="dim")
        return out

    def action_pick(self, n: int) -> None:
        """The disputer's value for the focused field: its ``n``-th value; then the next field."""
        f = self.fields[self.cursor] if self.fields else None
        if f is None or not 1 <= n <= len(f.values):
            self.app.bell()
            return
        v = f.values[n - 1]
        if self.verdict.values.get(f.key) == v.value:
            self.values.pop(f.key, None)
        else:
            self.values[f.key] = v.value
        self.action_move(1)
        self.refresh(layout=True)

    def action_confirm(self) -> None:
        if self.cursor >= len(self.fields) - 1:
            self.screen.focus_next()
        else:
            self.action_move(1)

    def action_move(self, d: int) -> None:
        self.cursor = min(max(0, self.cursor + d), len(self.fields) - 1)
        self.refresh()

    def action_clear(self) -> None:
        f = self.fields[self.cursor]
        self.values.pop(f.key, None)
        self.refresh()
