"""A job's processes as the fork server sees them in ``/proc``: their CPU seconds and
run-queue waits (:func:`read_job`), the job's process tree, stopping every process of it
at a hand-over and letting it go on, and the orphans a job left behind.

Used by :mod:`workstation.harness.forkserver` and :mod:`workstation.harness.custody`;
reads only ``/proc`` and sends signals (a process that is gone is skipped, never an error).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

#: seconds the server waits for every process of a job to stop at a hand-over.
FREEZE_TIMEOUT_S = 2.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class JobReading:
    """One reading of a job's processes in ``/proc`` (:func:`read_job`): ``cpu_s``, the CPU
    seconds (user + system) of every process of the job and of the children they reaped
    (``utime + stime + cutime + cstime`` of ``/proc/<pid>/stat``: threads that ended are in
    it); ``ready_ns``, per thread id of every live thread of the job, the nanoseconds it
    has waited on a run queue (runnable, not running: the second field of
    ``/proc/<pid>/task/<tid>/schedstat``); ``pids``: the processes read."""

    cpu_s: float = 0.0
    ready_ns: dict[int, int] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)


def _stat_ticks(pid: int) -> int | None:
    """``utime + stime + cutime + cstime`` of process ``pid`` in clock ticks (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])
    except (OSError, IndexError, ValueError):
        return None


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def read_job(pid: int, init: int) -> JobReading:
    """Every process of the job whose process is ``pid`` and whose pid-namespace init is
    ``init`` (0: none; :func:`job_processes`, the init itself included for its CPU), with
    their CPU seconds and every live thread's run-queue wait (:class:`JobReading`). One
    walk of the kernel's children lists: per process its ``stat``, per thread its
    ``children`` and ``schedstat``."""
    out = JobReading()
    ticks = 0
    todo = [pid] + ([init] if init else [])
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        t = _stat_ticks(p)
        if t is None:
            continue
        ticks += t
        out.pids.append(p)
        for tid in _threads(p):
            base = f"/proc/{p}/task/{tid}"
            try:
                with open(f"{base}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
                with open(f"{base}/schedstat", "rb") as f:
                    out.ready_ns[int(tid)] = int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out.cpu_s = ticks / _TICKS
    return out


def job_cpu_seconds(roots: tuple[int, ...]) -> float:
    """CPU seconds (user + system) of the job whose process and pid-namespace init are
    ``roots`` (``(pid, init)``; an init of 0 is none) and of everything they reaped
    (:func:`read_job`)."""
    pid, init = (tuple(roots) + (0, 0))[:2]
    return read_job(pid, init).cpu_s


def stop_and_wait(pid: int, timeout: float = 2.0) -> bool:
    """Send SIGSTOP to ``pid`` and wait until it is stopped (its state in /proc is T)."""
    os.kill(pid, signal.SIGSTOP)
    return wait_stopped([pid], time.monotonic() + timeout) == []


def wait_stopped(pids: list[int], deadline: float) -> list[int]:
    """Wait until every process of ``pids`` is stopped (state T) or gone; returns those
    still running at ``deadline``."""
    left = list(pids)
    while left:
        still = []
        for pid in left:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue  # gone
            if state not in (b"T", b"t", b"Z", b"X"):
                still.append(pid)
        left = still
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.0002)
    return left


def children(pid: int) -> list[int]:
    """The children of process ``pid`` (``/proc/<pid>/task/<tid>/children`` of each of its
    threads; a process that is gone has none)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def job_processes(pid: int, init: int) -> list[int]:
    """Every process of the job whose process is ``pid`` and whose pid-namespace init is
    ``init`` (0: none): the job process, its descendants, and whatever was re-parented to
    the init (not the init itself). Read from the kernel's children lists, not a scan of
    all of ``/proc`` (a few reads per process)."""
    todo = [pid] + (children(init) if init else [])
    seen: list[int] = []
    while todo:
        p = todo.pop()
        if p in seen or p == init:
            continue
        seen.append(p)
        todo.extend(children(p))
    return seen


def freeze(pid: int, init: int, target: int) -> tuple[list[int], str]:
    """Stop every process of the job (:func:`job_processes`) with ``SIGSTOP``, looking again
    until no new one appears (a process forking while it is stopped). Returns the stopped
    pids and "" or why the job could not be stopped whole (``target``, the process whose
    memory is read, must be among them)."""
    stopped: list[int] = []
    for _ in range(50):
        new = [p for p in job_processes(pid, init) if p not in stopped]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                continue
            stopped.append(p)
    else:
        return stopped, "the job kept making processes while kws stopped it"
    left = wait_stopped(stopped, time.monotonic() + FREEZE_TIMEOUT_S)
    if target in left or target not in stopped:
        return stopped, "the job could not be stopped for the check"
    if left:
        return stopped, f"{len(left)} process(es) of the job could not be stopped for the check"
    return stopped, ""


def thaw(pids: list[int]) -> None:
    """``SIGCONT`` to each of ``pids``."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


def kill_quietly(pid: int) -> None:
    """``SIGKILL`` to ``pid`` (nothing when it is gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def sweep_orphans(running: set[int]) -> None:
    """Kill children of this server that are no running job (orphans a job left behind,
    re-parented here because the server is a child subreaper)."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in running or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me:
            kill_quietly(int(name))
