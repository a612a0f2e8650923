"""Reports of a parametrized battery test, one task ahead (tests/test_samples.py,
tests/test_samples_real.py).

A battery on one task leaves the runner's slots idle much of the time (waits for late
writes, a reference's result, the parent's comparisons), so while the test of one task waits
for its report, the report of the next task in the test order is made beside it on the same
runner: two batteries side by side keep both cores busy. Verdicts do not depend on the
machine's load (kws's budgets are CPU seconds and blocked seconds, never wall time), so a
report made beside another is the report made alone. A task whose report needs something
process-wide patched (``alone``: injected quiet timings) is made with nothing beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager


class Prefetcher:
    """``get(task_id)``: ``make(task_id)``'s report, made at most once; the next task of
    ``order`` that is not ``alone`` starts beside it. ``alone`` tasks wait for everything
    running and are made by themselves, in the calling thread."""

    def __init__(self, order: list[str], make: Callable[[str], dict], alone: Callable[[str], bool]) -> None:
        self.order = list(order)
        self.make = make
        self.alone = alone
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kws-test-prefetch")
        self.futures: dict[str, Future[dict]] = {}
        self.done: dict[str, dict] = {}

    def _next(self, task_id: str) -> str | None:
        i = self.order.index(task_id) if task_id in self.order else len(self.order)
        for t in self.order[i + 1:]:
            if t not in self.futures and t not in self.done:
                return None if self.alone(t) else t
        return None

    def get(self, task_id: str) -> dict:
        if task_id in self.done:
            return self.done[task_id]
        if self.alone(task_id):
            for f in list(self.futures.values()):  # nothing beside it
                f.exception()
            self.done[task_id] = self.make(task_id)
            return self.done[task_id]
        if task_id not in self.futures:
            self.futures[task_id] = self.pool.submit(self.make, task_id)
        nxt = self._next(task_id)
        if nxt is not None:
            self.futures[nxt] = self.pool.submit(self.make, nxt)
        self.done[task_id] = self.futures.pop(task_id).result()
        return self.done[task_id]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def prefetching(order: list[str], make: Callable[[str], dict],
                alone: Callable[[str], bool] = lambda t: False) -> Iterator[Callable[[str], dict]]:
    """A :class:`Prefetcher`'s ``get``, closed (waiting for what runs) at the end."""
    p = Prefetcher(order, make, alone)
    try:
        yield p.get
    finally:
        p.close()
