"""Panel: the base of the review screen's panels (titled, bordered, maximisable)."""

from __future__ import annotations

from typing import Any

from textual.containers import Vertical

__all__ = ["Panel"]


class Panel(Vertical):
    """A titled, maximisable panel of the review screen. ``name`` is its key in the
    layout (spec, diff, checks, timing, rubric)."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    Panel { border: round $panel-lighten-2; padding: 0 0; height: 1fr; }
    Panel:focus-within { border: heavy $accent; }
    Panel > .panel-status { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.base_title = title
        self.border_title = title

    def focus_main(self) -> None:
        """Focus the panel's main widget."""
        for w in self.query("*"):
            if w.focusable:
                self.screen.set_focus(w)  # now: keys typed right after go there
                return
