"""ScrollPane: a focusable scrolling pane whose keys are the keymap's ``scroll`` bindings
(spec, history, timing, evidence, and the help, report and calibration views).

Textual's own ``VerticalScroll`` binds fixed keys; this one takes ``scroll.*`` from the
keymap (vim's j/k, g/G, ctrl+f/ctrl+b) and pages down with space, so every pane of the
review screen scrolls by keyboard with the same keys.
"""

from __future__ import annotations

from textual.containers import VerticalScroll

from workstation.tui.keymap import bindings_for

__all__ = ["ScrollPane"]


class ScrollPane(VerticalScroll, can_focus=True, inherit_bindings=False):
    """A focusable pane that scrolls with the ``scroll`` bindings."""

    BINDINGS = bindings_for("scroll")
