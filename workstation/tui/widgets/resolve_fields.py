"""ResolveFields: the resolution form's outcome and, for ``amended``, the resolver's values."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from workstation.tui.widgets.text import fit

__all__ = ["OUTCOMES", "ResolveFields"]

#: what happens to the disputed verdict (records.model.OUTCOMES, in the order 1-3 pick them).
OUTCOMES = ("upheld", "overturned", "amended")
_MEANS = {"upheld": "the verdict stands", "overturned": "the dispute's values replace it",
          "amended": "your values below replace it"}


class ResolveFields(Widget, can_focus=True):
    """Row 0: the outcome (``1``-``3``); then, one row per disputed field: the verdict's
    value, the disputer's, and (for ``amended``) the resolver's pick (``1``-``9``, the
    field's nth value). Enter moves on; from the last row to the rationale."""

    DEFAULT_CSS = "ResolveFields { height: auto; }"
    BINDINGS = [
        Binding("down,j", "move(1)", "Next row", show=False),
        Binding("up,k", "move(-1)", "Previous row", show=False),
        Binding("enter", "confirm", "Next row", show=False),
        Binding("backspace", "clear", "Clear", show=False),
        *(Binding(str(n), f"pick({n})", f"Value {n}", show=False) for n in range(1, 10)),
    ]

    def __init__(self, rubric: Any, dispute: Any) -> None:
        super().__init__()
        self.rubric = rubric
        self.cursor = 0
        self.outcome: str | None = None
        self.values: dict[str, str] = {}
        self.set_dispute(dispute)

    def set_dispute(self, dispute: Any) -> None:
        self.dispute = dispute
        self.keys = list(dispute.dispute_values)
        self.cursor, self.outcome, self.values = 0, None, {}
        self.refresh(layout=True)

    def _field(self, key: str) -> Any:
        return self.rubric.field(key) if self.rubric is not None else None

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.keys) + 2

    def render(self) -> Text:
        w = max(20, self.size.width)
        out = Text()
        sel = self.cursor == 0
        line = Text(("▶ " if sel else "  ") + fit("Outcome", 24)
                    + "  ".join(f"{i} {o}" for i, o in enumerate(OUTCOMES, 1))
                    + (f"  → {self.outcome}: {_MEANS[self.outcome]}" if self.outcome else ""))
        if sel and self.has_focus:
            line.stylize("reverse")
        out.append_text(line)
        out.append("\n")
        for i, key in enumerate(self.keys, 1):
            f = self._field(key)
            sel = self.cursor == i
            mine = self.values.get(key)
            line = Text(("▶ " if sel else "  ") + fit(f.label if f else key, 24)
                        + fit(f"verdict: {self.dispute.verdict_values.get(key, '-')}", 24)
                        + fit(f"dispute: {self.dispute.dispute_values.get(key, '-')}", 24)
                        + (f"→ {mine}" if mine else ""))
            if sel and self.has_focus:
                line.stylize("reverse")
            out.append_text(line)
            out.append("\n")
        f = self._field(self.keys[self.cursor - 1]) if self.cursor else None
        hint = ("1-3 pick the outcome" if self.cursor == 0 else
                "amended: " + "  ".join(f"{i} {v.value}" for i, v in enumerate(f.values, 1)) if f is not None else "")
        out.append(fit(hint + "  · Enter next", w), style="dim")
        return out

    def action_move(self, d: int) -> None:
        self.cursor = min(max(0, self.cursor + d), len(self.keys))
        self.refresh()

    def action_confirm(self) -> None:
        if self.cursor >= len(self.keys):
            self.screen.focus_next()
        else:
            self.action_move(1)

    def action_pick(self, n: int) -> None:
        if self.cursor == 0:
            if not 1 <= n <= len(OUTCOMES):
                self.app.bell()
                return
            self.outcome = OUTCOMES[n - 1]
            if self.outcome != "amended":
                self.values = {}
        else:
            f = self._field(self.keys[self.cursor - 1])
            if f is None or not 1 <= n <= len(f.values):
                self.app.bell()
                return
            self.outcome = "amended"
            self.values[f.key] = f.values[n - 1].value
        self.action_move(1)
        self.refresh(layout=True)

    def action_clear(self) -> None:
        if self.cursor == 0:
            self.outcome = None
        else:
            self.values.pop(self.keys[self.cursor - 1], None)
        self.refresh()
