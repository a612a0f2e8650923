"""The local pool: ``workers`` slots on this machine, each running one ``kws check`` child
at a time (:func:`workstation.screen.worker.run_spec`), no Ray needed.

Timing runs take the machine to themselves: a :class:`NodeGate` lets any number of
ordinary runs share the machine, or one timing run alone; a waiting timing run keeps new
ordinary runs from starting (writer preference), so it starts as soon as the running ones
end, and timing runs are taken from the queue before ordinary ones.
"""

from __future__ import annotations

import itertools
import queue
import signal
import socket
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from workstation.screen.keys import NodeEnv, probe_env
from workstation.screen.worker import RunOutcome, RunSpec, run_spec

__all__ = ["LocalPool", "NodeGate"]


class NodeGate:
    """Shared holds for ordinary runs, an exclusive hold for a timing run (see the module).

    :meth:`hold` blocks until the hold is granted or ``stop`` is set (then it yields False).
    """

    def __init__(self, stop: threading.Event | None = None) -> None:
        self._cv = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        self._stop = stop or threading.Event()

    @contextmanager
    def hold(self, exclusive: bool) -> Iterator[bool]:
        with self._cv:
            if exclusive:
                self._waiting += 1
                try:
                    while not self._stop.is_set() and (self._exclusive or self._shared):
                        self._cv.wait(0.2)
                finally:
                    self._waiting -= 1
                granted = not self._stop.is_set()
                if granted:
                    self._exclusive = True
            else:
                while not self._stop.is_set() and (self._exclusive or self._waiting):
                    self._cv.wait(0.2)
                granted = not self._stop.is_set()
                if granted:
                    self._shared += 1
        try:
            yield granted
        finally:
            with self._cv:
                if granted:
                    if exclusive:
                        self._exclusive = False
                    else:
                        self._shared -= 1
                self._cv.notify_all()

    @property
    def busy(self) -> tuple[int, bool]:
        """(ordinary runs holding, whether a timing run holds)."""
        with self._cv:
            return self._shared, self._exclusive


class LocalPool:
    """The default backend (see the module). ``workers``: concurrent ``kws check`` runs."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = max(1, int(workers))
        self.host = socket.gethostname()
        self._stop = threading.Event()
        self.gate = NodeGate(self._stop)
        self._todo: queue.PriorityQueue[tuple[int, int, RunSpec | None]] = queue.PriorityQueue()
        self._events: queue.Queue[tuple[str, object]] = queue.Queue()
        self._seq = itertools.count()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._inflight = 0
        self._threads = [threading.Thread(target=self._work, name=f"kws-screen-{i}", daemon=True)
                         for i in range(self.workers)]
        for t in self._threads:
            t.start()

    # -- the backend interface (workstation.screen.run.Backend) ---------------------------------

    def envs(self, modules: Iterable[str], device: str | None) -> list[NodeEnv]:
        """This machine's environment (one fork server started and closed)."""
        return [probe_env(modules, device, host=self.host)]

    def describe(self) -> str:
        return f"local pool, {self.workers} worker(s) on {self.host}"

    def submit(self, spec: RunSpec) -> None:
        with self._lock:
            self._inflight += 1
        self._todo.put((0 if spec.exclusive else 1, next(self._seq), spec))

    def pending(self) -> int:
        with self._lock:
            return self._inflight

    def poll(self, timeout: float) -> list[tuple[str, object]]:
        """Events since the last call: ``("started", (job, host))`` and ``("finished",
        RunOutcome)``; waits up to ``timeout`` s for the first."""
        out: list[tuple[str, object]] = []
        try:
            out.append(self._events.get(timeout=timeout))
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def cancel_all(self) -> None:
        """Stop: queued runs are dropped, running ones get SIGTERM (their supervisor kills
        the whole process tree) and come back as ``killed``."""
        self._stop.set()
        with self._lock:
            procs = list(self._procs.values())
        for p in procs:
            try:
                p.send_signal(signal.SIGTERM)
            except OSError:
                pass

    def close(self) -> None:
        self.cancel_all()
        for _ in self._threads:
            self._todo.put((-1, -1, None))
        for t in self._threads:
            t.join(timeout=30)

    # -- the slots --------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            _, _, spec = self._todo.get()
            if spec is None:
                return
            if self._stop.is_set():
                self._finish(RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="killed",
                                        stderr_tail="not started: kws screen stopped", host=self.host))
                continue
            with self.gate.hold(spec.exclusive) as granted:
                if not granted:
                    oc = RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="killed",
                                    stderr_tail="not started: kws screen stopped", host=self.host)
                else:
                    self._events.put(("started", (spec.job, self.host)))

                    def started(p: subprocess.Popen[bytes], job: str = spec.job) -> None:
                        with self._lock:
                            self._procs[job] = p
                        if self._stop.is_set():
                            p.send_signal(signal.SIGTERM)

                    oc = run_spec(spec, host=self.host, on_start=started)
                    with self._lock:
                        self._procs.pop(spec.job, None)
            self._finish(oc)

    def _finish(self, oc: RunOutcome) -> None:
        with self._lock:
            self._inflight -= 1
        self._events.put(("finished", oc))
