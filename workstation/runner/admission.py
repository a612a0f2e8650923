"""Admission of jobs to the fork server: normal jobs side by side, a timing job alone.

A normal job takes one of ``slots`` places and runs beside other normal jobs; an
*exclusive* job (a timing step, ``Runner.run(exclusive=True)``) runs with no other job at
all. Both decisions are made under one :class:`threading.Condition` over one state, so a
job is counted as running in the same atomic step that admits it: no exclusive job can be
admitted between a normal job's admission and its start.

Fairness (kept from the runner's earlier lock and semaphore): an exclusive job that waits
holds back every normal job that arrives after it (a stream of normal jobs cannot starve a
timing run), and exclusive jobs run one at a time; among waiters of one kind the order is
not defined (``threading.Condition`` wakes them in no promised order).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Admission:
    """Which jobs may run now (module doc).

    Args:
        slots: how many normal jobs may run at once (at least 1).

    Raises:
        ValueError: ``slots`` is below 1.
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self.slots = slots
        self._cv = threading.Condition()
        self._normal = 0                # normal jobs admitted and not yet done
        self._exclusive = False         # an exclusive job is admitted and not yet done
        self._waiting_normal = 0
        self._waiting_exclusive = 0

    @contextmanager
    def admitted(self, exclusive: bool) -> Iterator[None]:
        """Wait until the job may run, hold its place for the block, give it back after
        (also when the block raises)."""
        self._enter(exclusive)
        try:
            yield
        finally:
            self._leave(exclusive)

    @property
    def running(self) -> tuple[int, bool]:
        """(normal jobs running, whether an exclusive job runs) at this moment."""
        with self._cv:
            return self._normal, self._exclusive

    @property
    def waiting(self) -> tuple[int, int]:
        """(normal jobs waiting, exclusive jobs waiting) at this moment."""
        with self._cv:
            return self._waiting_normal, self._waiting_exclusive

    def _normal_may_run(self) -> bool:
        return not self._exclusive and not self._waiting_exclusive and self._normal < self.slots

    def _exclusive_may_run(self) -> bool:
        return not self._exclusive and not self._normal

    def _enter(self, exclusive: bool) -> None:
        with self._cv:
            if exclusive:
                self._waiting_exclusive += 1
                admitted = False
                try:
                    self._cv.wait_for(self._exclusive_may_run)
                    self._exclusive = admitted = True
                finally:
                    self._waiting_exclusive -= 1
                    if not admitted:  # interrupted: the normal jobs it held back may go
                        self._cv.notify_all()
            else:
                self._waiting_normal += 1
                try:
                    self._cv.wait_for(self._normal_may_run)
                finally:
                    self._waiting_normal -= 1
                self._normal += 1

    def _leave(self, exclusive: bool) -> None:
        with self._cv:
            if exclusive:
                self._exclusive = False
            else:
                self._normal -= 1
            self._cv.notify_all()
