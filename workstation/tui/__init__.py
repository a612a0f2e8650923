"""The kws review app (Textual): display and dispatch only. See :mod:`workstation.tui.app`
and ``docs/tui.md``.

Owns: the app (:mod:`~workstation.tui.app`: screens, workers, the ``queue_changed`` and
``session_event`` signals), key bindings and keymap files (:mod:`~workstation.tui.keymap`),
the command palette's commands (:mod:`~workstation.tui.commands`), the messages workers
post (:mod:`~workstation.tui.messages`), the screens (:mod:`workstation.tui.screens`) and
the widgets (:mod:`workstation.tui.widgets`).

May import: Textual, Rich, the standard library (and msgspec for the keymap schema),
:mod:`workstation.settings` (the config folder), :mod:`workstation.review` (the session, its views and the services that do every
git, record and file operation), :mod:`workstation.schema` and :mod:`workstation.rubric`
(rubric types to display), and itself. Never the records, repository, task, runner,
engine, checks, harness or analysis packages, not even inside a function.

Importing this package imports nothing heavy: the app module loads Textual; the check
engine runs in a check server process of its own.
"""
