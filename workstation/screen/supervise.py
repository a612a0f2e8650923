"""The supervisor of one ``kws check`` run on a worker: a time limit, and nothing left behind.

Usage: ``python -m workstation.screen.supervise --timeout S [--parent PID] -- COMMAND...``

The supervisor makes itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``),
so every process its command starts stays its descendant even after a double fork or
``setsid`` (the fork server and job children run in sessions of their own). It runs
COMMAND with the supervisor's stdout and stderr, and then:

- when COMMAND exits: kills whatever of its process tree is still alive (a daemonised
  candidate, a fork server waiting on a hung job) and exits with COMMAND's status;
- at the time limit (``S`` seconds after COMMAND started): kills the whole tree with
  ``SIGKILL`` and exits 124 (as ``timeout(1)`` does);
- on ``SIGTERM``, ``SIGINT`` or ``SIGHUP`` (``kws screen`` stopping, Ray's force-cancel
  killing the worker: the supervisor asks for ``SIGTERM`` when its parent dies,
  ``prctl(PR_SET_PDEATHSIG)``): kills the tree and exits ``128 + signal``.

With ``--module MOD`` COMMAND is the argument list of ``python -m MOD``, run in a forked
child of the supervisor's own interpreter (``kws screen`` runs ``kws check`` so: one
interpreter start per run, not two). With ``--report-file PATH`` it writes ``{"child_seconds", "killed", "started_at", "cleanup_seconds"}``
(COMMAND's wall time, the processes killed after it, when the supervisor's interpreter was
up, the clean-up's time) there at the end. With ``--parent PID`` it exits at once (143) when its parent is already not ``PID`` (the
parent died before the death signal was armed). Where ``prctl`` is not available (not
Linux) the tree is still killed by walking the process table; orphans that escaped it then
are not found. Processes are listed with psutil.
"""

from __future__ import annotations

import time

#: when this interpreter was up (Unix time): the worker takes the time before it as the
#: interpreter's start, which a plain ``kws check`` pays too; what follows is the supervisor's
_STARTED = time.time()

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import psutil  # noqa: E402

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXIT_TIMEOUT = 124


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def kill_tree(me: psutil.Process, rounds: int = 20) -> int:
    """SIGKILL every descendant of ``me`` until none is left (orphans re-parent to a
    subreaper while it works); reap them. Returns how many processes were killed."""
    killed = 0
    for _ in range(rounds):
        try:
            procs = me.children(recursive=True)
        except psutil.Error:
            procs = []
        if not procs:
            break
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
                killed += 1
            except psutil.Error:
                pass
        time.sleep(0.005)
        _reap()
    _reap()
    return killed


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork_module(module: str, argv: list[str]) -> int:
    """Fork; the child runs ``python -m module argv...`` in this interpreter and exits with
    its status. Returns the child's pid."""
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    # the child dies with the supervisor: a supervisor killed outright (SIGKILL, e.g. by Ray
    # force-cancelling its worker, which also kills the worker's children) cannot clean up,
    # and the fork cleared the death signal it had itself
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)
    try:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.argv = [module, *argv]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
    except BaseException:  # noqa: BLE001  (the child must never return into the supervisor)
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int) -> int:
    """The exit status of child ``pid`` (``-signal`` when a signal ended it)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workstation.screen.supervise")
    ap.add_argument("--timeout", type=float, required=True, help="seconds before the tree is killed")
    ap.add_argument("--parent", type=int, default=0, help="exit at once when the parent is not this pid")
    ap.add_argument("--report-file", default="", help="write {child_seconds, killed} here as JSON at the end")
    ap.add_argument("--module", default="", help="run this Python module with COMMAND as its arguments, "
                    "in a forked child of this interpreter (no second interpreter start)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd and not args.module:
        ap.error("no command to run")
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if args.parent and os.getppid() != args.parent:
        return 128 + signal.SIGTERM

    def on_signal(signum: int, _frame: object) -> None:
        raise _Stop(signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, on_signal)
    me = psutil.Process()
    t0 = time.monotonic()
    killed = 0
    try:
        # the deadline is a timer signal: the wait below blocks, no polling
        signal.setitimer(signal.ITIMER_REAL, max(0.001, args.timeout))
        if args.module:
            status = _wait(_fork_module(args.module, cmd))
        else:
            try:
                child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
            except OSError as e:
                print(f"kws screen: cannot start {cmd[0]}: {e}", file=sys.stderr)
                return 127
            status = child.wait()
        signal.setitimer(signal.ITIMER_REAL, 0)
        code = status if status >= 0 else 128 - status
    except _Stop as stop:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if stop.signum == signal.SIGALRM:
            code = EXIT_TIMEOUT
        else:
            code = 128 + stop.signum
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)  # cleaning up: a second signal must not cut it short
    t_end = time.monotonic()
    killed = kill_tree(me)  # on a normal exit: what the command left running
    if code == EXIT_TIMEOUT:
        print(f"kws screen: time limit of {args.timeout:g} s reached; killed {killed} process(es)", file=sys.stderr)
    if args.report_file:
        try:
            with open(args.report_file, "w", encoding="utf-8") as fh:
                json.dump({"child_seconds": round(t_end - t0, 6), "killed": killed, "started_at": _STARTED,
                           "cleanup_seconds": round(time.monotonic() - t_end, 6)}, fh)
        except OSError:
            pass
    return code


if __name__ == "__main__":
    sys.exit(main())
