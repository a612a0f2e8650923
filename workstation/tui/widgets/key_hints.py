"""KeyHints: the bottom line of a screen: the keys of the actions the footer shows
(``ActionSpec.show``) where the focus is, one Static (Textual's ``Footer`` mounts a widget
per key, which costs the first paint of every screen a tenth of a second)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from workstation.tui.widgets.text import set_static

__all__ = ["KeyHints"]


class KeyHints(Static):
    """``key description`` for each shown binding active on the screen (the focused
    widget's first), updated when the focus moves or the keymap changes
    (:meth:`update_hints`)."""

    DEFAULT_CSS = """
    KeyHints { dock: bottom; height: 1; background: $panel; color: $text-muted; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", markup=False, **kw)

    def on_mount(self) -> None:
        self.call_after_refresh(self.update_hints)

    def update_hints(self) -> None:
        if not self.is_attached:
            return
        screen = self.screen
        seen: set[str] = set()
        out = Text(no_wrap=True, overflow="ellipsis")
        for active in screen.active_bindings.values():
            b = active.binding
            if not b.show or not b.description or b.action in seen:
                continue
            seen.add(b.action)
            out.append(f" {self.app.get_key_display(b)} ", style="bold reverse")
            out.append(f" {b.description} ")
        set_static(self, out)
