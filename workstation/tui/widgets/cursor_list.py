"""CursorList: a virtualised list with a cursor (Textual's Line API): only the rows on
screen are rendered, so a list of thousands of rows paints as fast as one of ten.

Colour is never the only signal: subclasses draw the cursor row in reverse video and give
every status a word or glyph, so lists read the same with ``NO_COLOR``.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["CursorList"]


class CursorList(ScrollView, can_focus=True, inherit_bindings=False):
    """A list with a cursor. Subclasses implement :meth:`row_count`, :meth:`render_row`
    and optionally :meth:`render_header` (``header_lines`` fixed lines on top)."""

    DEFAULT_CSS = """
    CursorList { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    """
    COMPONENT_CLASSES = {"cursorlist--cursor", "cursorlist--header", "cursorlist--dim"}

    cursor: reactive[int] = reactive(0, always_update=True)
    header_lines = 0
    #: the reviewer moved the cursor (a key or a click) since the list was made
    user_moved = False

    class CursorMoved(Message):
        """The cursor moved to ``index``."""

        def __init__(self, sender: CursorList, index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

        @property
        def control(self) -> CursorList:
            return self.list

    def row_count(self) -> int:
        return 0

    def render_row(self, index: int, width: int, selected: bool) -> Strip:
        return Strip.blank(width, self.rich_style)

    def render_header(self, y: int, width: int) -> Strip:
        return Strip.blank(width, self.rich_style)

    # -- geometry ------------------------------------------------------------------------

    def refresh_rows(self) -> None:
        """Call after the rows changed: resizes, clamps the cursor and repaints."""
        n = self.row_count()
        self.virtual_size = Size(self.size.width, n + self.header_lines)
        if n and self.cursor >= n:
            self.cursor = n - 1
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, self.row_count() + self.header_lines)

    @property
    def page_rows(self) -> int:
        return max(1, self.size.height - self.header_lines)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y < self.header_lines:
            strip = self.render_header(y, width)
        else:
            index = int(self.scroll_offset.y) + y - self.header_lines
            if index >= self.row_count():
                return Strip.blank(width, self.rich_style)
            strip = self.render_row(index, width, index == self.cursor).crop(0, width)
        # every segment gets the widget's base style (line filters such as NO_COLOR's
        # monochrome filter need a style on each segment)
        return strip.apply_style(self.rich_style)

    def watch_cursor(self, old: int, new: int) -> None:
        n = self.row_count()
        if n == 0:
            return
        if new < 0 or new >= n:
            self.cursor = min(max(new, 0), n - 1)
            return
        self.scroll_to_cursor()
        self.refresh()
        self.post_message(self.CursorMoved(self, new))

    def scroll_to_cursor(self) -> None:
        """Scroll so that the cursor's row is on screen (also after the rows changed under
        it: a cursor kept on its entry while rows sorted above it moved it down)."""
        new = self.cursor
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + self.page_rows:
            self.scroll_to(y=new - self.page_rows + 1, animate=False)

    # -- actions (bound by subclasses) -----------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        self.user_moved = True
        if self.row_count():
            self.cursor = min(max(self.cursor + delta, 0), self.row_count() - 1)

    def action_cursor_down(self) -> None:
        self.action_cursor(1)

    def action_cursor_up(self) -> None:
        self.action_cursor(-1)

    def action_page_down(self) -> None:
        self.action_cursor(self.page_rows)

    def action_page_up(self) -> None:
        self.action_cursor(-self.page_rows)

    def action_cursor_top(self) -> None:
        self.user_moved = True
        self.cursor = 0

    def action_cursor_bottom(self) -> None:
        self.user_moved = True
        self.cursor = max(0, self.row_count() - 1)

    def on_click(self, event: Any) -> None:
        self.user_moved = True
        y = event.y - self.header_lines
        if y >= 0:
            index = int(self.scroll_offset.y) + y
            if index < self.row_count():
                self.cursor = index

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)
