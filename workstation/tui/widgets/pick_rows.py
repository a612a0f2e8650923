"""PickRows: a short form of rows, one focused, where ``1``-``9`` pick a value for the
focused row (the dispute and resolution forms' fields)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from workstation.tui.widgets.text import fit

__all__ = ["PickRows"]


class PickRows(Widget, can_focus=True):
    """Rows of a form with a cursor (``▶``, reverse video while focused): ↑/↓ (``j``/``k``)
    move, ``1``-``9`` pick the focused row's nth value and move on (a number out of range
    rings the bell), Enter moves on (from the last row to the next widget of the screen),
    Backspace clears the focused row, and a dim hint line sits under the rows.

    Subclasses implement :meth:`row_texts`, :meth:`pick`, :meth:`clear` and :meth:`hint`."""

    DEFAULT_CSS = "PickRows { height: auto; }"
    BINDINGS = [
        Binding("down,j", "move(1)", "Next row", show=False),
        Binding("up,k", "move(-1)", "Previous row", show=False),
        Binding("enter", "confirm", "Next row", show=False),
        Binding("backspace", "clear", "Clear", show=False),
        *(Binding(str(n), f"pick({n})", f"Value {n}", show=False) for n in range(1, 10)),
    ]

    cursor = 0

    class Changed(Message):
        """A value was picked or cleared (the form's draft is saved)."""

    def row_texts(self) -> list[str]:
        """The text of each row, without the cursor marker."""
        return []

    def pick(self, row: int, n: int) -> bool:
        """Take value ``n`` (1-based) for ``row``; False when there is no such value."""
        return False

    def clear(self, row: int) -> None:
        """Forget what was picked for ``row``."""

    def hint(self) -> str | None:
        """The hint line for the focused row, or None for none."""
        return None

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.row_texts()) + 1

    def render(self) -> Text:
        out = Text()
        for i, text in enumerate(self.row_texts()):
            sel = i == self.cursor
            line = Text(("▶ " if sel else "  ") + text)
            if sel and self.has_focus:
                line.stylize("reverse")
            out.append_text(line)
            out.append("\n")
        hint = self.hint()
        if hint is not None:
            out.append(fit(hint, max(20, self.size.width)), style="dim")
        return out

    def action_move(self, d: int) -> None:
        self.cursor = min(max(0, self.cursor + d), max(0, len(self.row_texts()) - 1))
        self.refresh()

    def action_confirm(self) -> None:
        if self.cursor >= len(self.row_texts()) - 1:
            self.screen.focus_next()
        else:
            self.action_move(1)

    def action_pick(self, n: int) -> None:
        if not self.pick(self.cursor, n):
            self.app.bell()
            return
        self.post_message(self.Changed())
        self.action_move(1)
        self.refresh(layout=True)

    def action_clear(self) -> None:
        self.clear(self.cursor)
        self.post_message(self.Changed())
        self.refresh()
