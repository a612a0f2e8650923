"""Autosave of review drafts: :class:`DraftSaver` writes them in a thread of its own, so
a keystroke never waits on the disk."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from workstation.records.drafts import Draft, FormDraft, save_draft, save_form_draft

__all__ = ["DraftSaver"]


class DraftSaver:
    """Writes drafts in a background thread, newest wins per draft: :meth:`submit` returns
    at once; the thread saves the latest submitted version of each draft (a verdict draft
    per queue and task, a form draft per queue, kind and record: :func:`draft_key`), so a
    quick switch from one task or dispute to another never drops the first one's last
    change (atomic writes: :func:`workstation.records.drafts.save_draft`,
    :func:`~workstation.records.drafts.save_form_draft`). ``on_error(exc)`` is called from
    the thread when a save fails. :meth:`flush` waits until everything submitted is on disk.
    ``save``: what writes a draft (default: by its type)."""

    def __init__(self, on_error: Callable[[BaseException], None] | None = None,
                 save: Callable[[Any], Any] | None = None) -> None:
        self._save = save or _save_any
        self._on_error = on_error
        self._cv = threading.Condition()
        self._pending: dict[tuple[str, ...], Any] = {}
        self._busy = False
        self._closed = False
        self.saved = 0
        self._thread = threading.Thread(target=self._loop, name="kws-draft-saver", daemon=True)
        self._thread.start()

    def submit(self, draft: Draft | FormDraft) -> None:
        with self._cv:
            self._pending[draft_key(draft)] = draft
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if not self._pending:  # closed, nothing left to save
                    return
                d = self._pending.pop(next(iter(self._pending)))
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
            while self._pending or self._busy:
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


def draft_key(draft: Draft | FormDraft) -> tuple[str, ...]:
    """What names one draft: (queue, task) for a verdict draft, (queue, kind, record id)
    for a form draft."""
    if isinstance(draft, FormDraft):
        return (draft.queue, draft.kind, draft.target)
    return (draft.queue, draft.task)


def _save_any(draft: Draft | FormDraft) -> Any:
    return save_form_draft(draft) if isinstance(draft, FormDraft) else save_draft(draft)
