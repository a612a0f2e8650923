"""What the fork server checks of itself before it says ``ready``: that a job gets
namespaces of its own (:func:`selftest_namespaces`), that the out-of-process verifier sees
a patch (:func:`selftest_verifier`), and the resource limits in force
(:func:`limits_in_force`). Each self-test returns "" when all holds, else why not (the
``Ready`` message carries it and the runner says so in every report).
"""

from __future__ import annotations

import os
import resource
import signal
import time

from workstation.harness import jobns, procs
from workstation.harness.watch import VerifyError, WatchTable


def _namespace_problems() -> list[str]:
    """In the job process of the self-test (its namespaces entered, privileges dropped):
    what it sees that a job must not (empty when all holds)."""
    seen = sorted(n for n in os.listdir("/proc") if n.isdigit())
    problems = []
    if (os.getpid(), os.getppid()) != (2, 0):
        problems.append(f"pid {os.getpid()}, parent {os.getppid()} (want 2, 0)")
    if seen != ["1", "2"]:
        problems.append(f"/proc lists {seen[:5]}")
    if jobns.capabilities().get("CapEff", "1").strip("0"):
        problems.append("capabilities left")
    try:
        open("/proc/1/environ", "rb").close()
        problems.append("the init's /proc/1/environ is readable")
    except OSError:
        pass
    problems += _shared_write_problems()
    return problems


def _shared_write_problems() -> list[str]:
    """What a job could write that another job would see: the sandbox's root, a ``/dev``
    entry beyond the job's own nodes, the kernel's keyrings (empty when none)."""
    problems = []
    for folder in ("/", "/kws", "/dev"):
        if os.access(folder, os.W_OK):
            problems.append(f"{folder} is writable")
    extra = sorted(n for n in os.listdir("/dev") if n not in jobns.DEV_NODES and n not in jobns.DEV_LINKS
                   and n != "shm" and not n.startswith(jobns.DEV_GPU_PREFIX))
    if extra:
        problems.append(f"/dev holds {extra[:5]}")
    import ctypes

    nr = jobns.KEYRING_SYSCALLS.get(0xC000003E if os.uname().machine == "x86_64" else 0xC00000B7, (0, 0, 0))[2]
    if nr and jobns.libc().syscall(nr, 0, ctypes.c_long(-4), 0, 0, 0) != -1:  # keyctl(GET_KEYRING_ID, @u)
        problems.append("the kernel's user keyring is reachable")
    return problems


def _namespace_child(w: int) -> None:
    """The self-test's job process: set up as a job is, report on ``w``; never returns."""
    try:
        os.setsid()
        jobns.unshare(jobns.JOB_OWN_NAMESPACES)
        jobns.enter_job_view("/tmp/kws-selftest", None)
        jobns.drop_privileges()
        jobns.deny_keyrings()
        problems = _namespace_problems()
        if problems:
            os.write(w, ("; ".join(problems)).encode()[:500])
            os._exit(3)
        os._exit(0)
    except BaseException as e:  # noqa: BLE001  (reported to the server on the pipe)
        os.write(w, str(e).encode()[:500])
        os._exit(4)


def selftest_namespaces(pidns: jobns.PidNamespaces) -> str:
    """Set up one job's namespaces as the fork server does (a pid namespace from the
    nursery ``pidns``, the job process forked into it, its view, privileges dropped) and
    check what the job sees: pid 2 with a parent outside its namespace, only its namespace's
    processes in ``/proc``, no capability, the init's memory unreadable. "" when all holds,
    else why not."""
    os.makedirs("/tmp/kws-selftest", exist_ok=True)
    r, w = os.pipe()
    init = 0
    try:
        init = pidns.new()
        pid = pidns.fork_into(init)
    except OSError as e:
        if init:
            os.kill(init, signal.SIGKILL)
        return f"the job namespaces could not be made: {e}"
    if pid == 0:
        os.close(r)
        _namespace_child(w)
    os.close(w)
    _, st = os.waitpid(pid, 0)
    os.kill(init, signal.SIGKILL)
    text = os.read(r, 1000).decode(errors="replace")
    os.close(r)
    code = os.waitstatus_to_exitcode(st)
    if code == 0:
        return ""
    return text or f"the namespace self-test exited with {code}"


def selftest_verifier(table: WatchTable) -> str:
    """Fork a child that patches ``time.perf_counter`` and check that the verifier ``table``
    sees it: "" when it does, else why not (e.g. ptrace restricted by Yama)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        import time as _t

        _t.perf_counter = lambda: 0.0
        os.write(w, b"x")
        time.sleep(30)
        os._exit(0)
    os.close(w)
    try:
        os.read(r, 1)
        os.close(r)
        if not procs.stop_and_wait(pid):
            return "the verifier's self-test child could not be stopped"
        try:
            changes = table.verify(pid)
        except VerifyError as e:
            return f"the fork server cannot read a job's memory: {e}"
        if changes != ["time.perf_counter replaced"]:
            return f"the verifier's self-test saw {changes[:3]} instead of time.perf_counter replaced"
        return ""
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def limits_in_force() -> dict[str, list[int]]:
    """The server's resource limits: name (``as``, ``data``, ``fsize``, ``nofile``,
    ``nproc``, ``stack``) -> [soft, hard]."""
    out = {}
    for name in ("AS", "DATA", "FSIZE", "NOFILE", "NPROC", "STACK"):
        soft, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
        out[name.lower()] = [soft, hard]
    return out
