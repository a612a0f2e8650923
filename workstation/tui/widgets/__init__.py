"""The app's widgets, one class per module: the review screen's panels (``Panel`` and
the spec, diff, checks, timing and rubric panels), the rubric form and rationale editor, the
virtualised lists (``CursorList``, ``QueueTable``, ``ChecksList``), the source viewer, the
queue's filter line and the dispute form's fields; shared text helpers in
:mod:`~workstation.tui.widgets.text`. Each widget's style is its ``DEFAULT_CSS``.

A widget displays what it is given (a review session, rows, a diff) and forwards keys;
it never reads files, git or records. May import what :mod:`workstation.tui` may, and of
the TUI only :mod:`workstation.tui.keymap` and other widgets (never screens or the app).
"""
