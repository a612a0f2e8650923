"""Autosave of review drafts: :class:`DraftSaver` writes them in a thread of its own, so
a keystroke never waits on the disk."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from workstation.records.drafts import Draft, save_draft

__all__ = ["DraftSaver"]


class DraftSaver:
    """Writes drafts in a background thread, newest wins: :meth:`submit` returns at once;
    the thread saves the latest submitted draft (atomic write, see
    :func:`workstation.records.drafts.save_draft`). ``on_error(exc)`` is called from the thread when
    a save fails. :meth:`flush` waits until everything submitted is on disk."""

    def __init__(self, on_error: Callable[[BaseException], None] | None = None,
                 save: Callable[[Draft], Any] | None = None) -> None:
        self._save = save or save_draft
        self._on_error = on_error
        self._cv = threading.Condition()
        self._pending: Draft | None = None
        self._busy = False
        self._closed = False
        self.saved = 0
        self._thread = threading.Thread(target=self._loop, name="kws-draft-saver", daemon=True)
        self._thread.start()

    def submit(self, draft: Draft) -> None:
        with self._cv:
            self._pending = draft
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                d = self._pending
                if d is None:  # closed, nothing left to save
                    return
                self._pending = None
                self._busy = True
            try:
                self._save(d)
                self.saved += 1
            except Exception as e:  # noqa: BLE001  (reported to the UI, never fatal)
                if self._on_error is not None:
                    self._on_error(e)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until no draft is pending or being written; False on timeout."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._pending is not None or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush, then stop the thread."""
        self.flush(timeout)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout)
