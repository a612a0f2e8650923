"""The kws review app (Textual). See :mod:`workstation.tui.app` and ``docs/tui.md``.

Importing this package imports nothing heavy: the app module loads Textual, and the
engine (with its check modules) is only imported inside worker threads.
"""
