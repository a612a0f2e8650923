"""The app's screens, one per module: the queue (:mod:`~workstation.tui.screens.queue`), the
review of one task (:mod:`~workstation.tui.screens.review`), the help
(:mod:`~workstation.tui.screens.help`), the dispute and resolution forms
(:mod:`~workstation.tui.screens.dispute`, :mod:`~workstation.tui.screens.resolve`, both a
:mod:`~workstation.tui.screens.record_form`), the confirmation dialog and text views.

A screen composes widgets, dispatches keys to the review session and runs
:mod:`workstation.review.services` in worker threads; it learns of changes from the app's
signals. May import what :mod:`workstation.tui` may, and of the TUI its keymap, messages and
widgets (never :mod:`workstation.tui.app` or :mod:`workstation.tui.commands`).
"""
