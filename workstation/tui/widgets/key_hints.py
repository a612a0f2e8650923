"""KeyHints: the bottom line of a screen: the keys of the actions the footer shows
(``ActionSpec.show``) where the focus is, one Static (Textual's ``Footer`` mounts a widget
per key, which costs the first paint of every screen a tenth of a second)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from workstation.tui.widgets.text import set_static

__all__ = ["KeyHints"]


class KeyHints(Static):
    """``key description`` for each shown binding active on the screen (the focused
    widget's first), updated when the focus moves, the keymap changes
    (:meth:`update_hints`) or the terminal is resized. Hints that do not fit one line go on
    a second one (an 80-column terminal shows them all); what fits on neither is left out,
    and F1 lists every key."""

    DEFAULT_CSS = """
    KeyHints { dock: bottom; height: 1; background: $panel; color: $text-muted; }
    """
    #: lines the hints may take at most
    MAX_LINES = 2

    def __init__(self, **kw) -> None:
        super().__init__("", markup=False, **kw)

    def on_mount(self) -> None:
        self.call_after_refresh(self.update_hints)

    def on_resize(self) -> None:
        self.update_hints()

    def update_hints(self) -> None:
        if not self.is_attached:
            return
        screen = self.screen
        seen: set[str] = set()
        pairs: list[tuple[str, str]] = []
        for active in screen.active_bindings.values():
            b = active.binding
            if not b.show or not b.description or b.action in seen:
                continue
            seen.add(b.action)
            pairs.append((f" {self.app.get_key_display(b)} ", f" {b.description} "))
        width = self.size.width or self.app.size.width or 80
        lines: list[Text] = [Text(no_wrap=True, overflow="ellipsis")]
        for key, desc in pairs:
            need = cell_len(key) + cell_len(desc)
            if lines[-1].cell_len and lines[-1].cell_len + need > width:
                if len(lines) == self.MAX_LINES:
                    break
                lines.append(Text(no_wrap=True, overflow="ellipsis"))
            lines[-1].append(key, style="bold reverse")
            lines[-1].append(desc)
        height = len(lines)
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height
        set_static(self, Text("\n").join(lines))
