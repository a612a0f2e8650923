"""A job's processes as the fork server sees them in ``/proc``: their CPU seconds, the
job's process tree, stopping every process of it at a hand-over and letting it go on, and
the orphans a job left behind.

Used by :mod:`workstation.harness.forkserver` and :mod:`workstation.harness.custody`;
reads only ``/proc`` and sends signals (a process that is gone is skipped, never an error).
"""

from __future__ import annotations

import os
import signal
import time

#: seconds the server waits for every process of a job to stop at a hand-over.
FREEZE_TIMEOUT_S = 2.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU clock ticks: utime + stime + cutime + cstime) of every process
    this server sees in ``/proc``."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def job_cpu_seconds(roots: tuple[int, ...]) -> float:
    """CPU seconds (user + system) of the processes under ``roots`` (the job process and its
    pid-namespace init; 0 entries are ignored) and of everything they reaped: the sum of
    ``utime + stime + cutime + cstime`` over each root and its descendants."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    todo = [r for r in roots if r and r in table]
    ticks = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        ticks += table[pid][1]
        todo.extend(children.get(pid, ()))
    return ticks / _TICKS


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
