"""The fork server: imports torch and triton once, then forks one job per request.

Run by :class:`workstation.runner.sandbox.Runner` as ``python -m
workstation.harness.forkserver NICE MODE`` (``MODE``: ``bwrap`` inside the bubblewrap
sandbox of :mod:`workstation.runner.bwrap`, or ``none``) in the scrubbed environment. It
never runs task code and never initialises CUDA (children would inherit a broken
context): it asks NVML whether a GPU exists.

Protocol: the typed messages of :mod:`workstation.protocol.control`, one JSON object per
line. The parent writes :class:`~workstation.protocol.control.RunJob`, ``KillJob`` and
``CpuAsk``; the server answers ``Ready`` once, then per job ``Started``, one ``Verified``
per step the job handed over (see *Custody*), one ``CpuUsage`` per ``CpuAsk`` of a running
job (see *CPU time* and *Blocked time*) and ``Exited`` (``status``: the job process's exit code, or minus the
signal that ended it; ``killed`` when the server killed it on request). A request line
that does not decode is ignored (and named on the server's stderr).

CPU time: ``cpu_s`` is the CPU seconds (user + system) every process of the job has used
so far, read from ``/proc/<pid>/stat`` (:mod:`workstation.harness.procs`): the job process, its descendants, whatever was
re-parented to the job's pid-namespace init, and (through each process's ``cutime`` /
``cstime``) every child they have already reaped. The runner's step budgets are in these
seconds, so a loaded machine slows a job without changing what stops it. The harness marks
the import of a task file on its channel (``I 1`` before, ``I 0`` after;
:func:`workstation.harness.import_phase`); the server adds the CPU and wall seconds between
the two marks to ``import_cpu_s`` / ``import_wall_s`` (an import still running counts up to
now; ``importing`` says one is; :class:`workstation.harness.custody.ServerJob`), which the
runner charges to the job's import budget instead of the step's.

Blocked time: ``blocked_s`` is the wall time in which the job waited without computing and
without waiting to compute: per interval between two readings, the wall time less the CPU
seconds of the job (as above) less the seconds its live threads waited on a run queue
(``/proc/<pid>/task/<tid>/schedstat``), clipped at 0, summed. A process starved on a
loaded machine is runnable, so load does not make it blocked; a sleep, a blocked read, a
wait on a lock no one releases or a deadlock of two threads is. A thread waiting in
``join`` on a thread that computes is not: the other's CPU covers the interval. The time
the job waits on kws itself is not counted: a hand-over being checked (the job is stopped
then) and kws's simulated load (``W 1`` / ``W 0``, the ``test_stretch`` setting). What is
lost: the run-queue wait of a thread or process that ended between two readings (at most
one interval each; its CPU is kept through ``cutime``). The runner stops a step whose
blocked seconds pass its wait budget (:class:`workstation.runner.limits.BudgetWatch`).

A job (``MODE=bwrap``) is two processes: a small confined init, pid 1 of a fresh pid
namespace, made by the pid-namespace nursery the server forks before it imports torch; and
the job process, forked by the server into that namespace, which takes its own mount, IPC,
network and UTS namespaces, sets up the job's private file-system view, drops every
capability (:mod:`workstation.harness.jobns`) and runs the harness. The job process is the
only fork of the (large) server per job; when it ends, the server kills the init and with
it whatever the job left in its namespace. With ``MODE=none`` the job is one forked process
in its own session, and the server is a child subreaper that kills whatever a job left
behind.

Custody: after every step the harness writes ``V <sha256 of step-<i>.json> <sha256 of
step-<i>.npz or ->`` on its channel to the server and waits. The server counts these
messages itself (the job never names a step), stops every process of the job
(``SIGSTOP``; a helper the job forked too), reads the job's watched namespaces from outside
(:mod:`workstation.harness.watch`), hashes the step's two files as they are on disk, checks
them against what the harness said it wrote (and that no later step has started),
continues the job and answers with the hashes it recorded. The parent uses a step's files
only when their bytes hash to those values (:mod:`workstation.protocol.control`). More
hand-overs than steps, or a line kws's harness never writes, breaks the job's custody: the
server reports it as a ``Verified`` of step ``steps`` (past the last) with ``custody`` set,
and the parent refuses every step of the job (:mod:`workstation.harness.custody`).
Such a job, and one that hands over out of order, does not take the server's answers or
closes its channel while it runs, is ended at once (``Exited.ended`` says why); the
server never blocks on a job (its answers are written without blocking, a job's lines are
handled a few per turn of the loop).

Before it says ``ready`` the server checks that a job gets namespaces of its own and that the
verifier sees a patch (:mod:`workstation.harness.serverchecks`).

When the parent's end of stdin closes (kws exited or was killed), the server kills every
job and exits; inside bubblewrap its exit ends the sandbox (``--die-with-parent`` covers a
server that does not get that far).

Device choice: ``KWS_DEVICE`` (``cpu``/``cuda``; :data:`workstation.protocol.childenv.DEVICE`,
set by the runner from the ``device`` setting) when set, else CUDA when available.
On the CPU, ``TRITON_INTERPRET=1`` is set before triton is imported.

Optional backends: ``versions`` names ``jax`` when JAX is installed (the ``kws[pallas]``
extra) and ``nki`` when an NKI with ``simulate_kernel`` imports. JAX is imported into the
server (``workstation.harness.pallas.install``: JAX, Pallas, the ``pallas_call`` wrapper;
about 1.5 s) before forking the first job whose task files import it, so that its
children do not each pay the import; the server never creates a JAX array (a child
forked after one deadlocks).
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time
from typing import Any

import msgspec

from workstation.harness import jobns, procs, serverchecks
from workstation.harness.custody import (
    CLOSED_GRACE_S,
    ServerJob,
    emit,
    end_job,
    handle_channel,
    handle_lines,
    read_channel,
)
from workstation.harness.watch import WatchTable
from workstation.protocol import childenv, control
from workstation.protocol.steps import read_job

_MODE = "none"
#: the pid-namespace maker of ``MODE=bwrap`` (made before torch is imported).
_PIDNS: jobns.PidNamespaces | None = None
#: job id -> its folder, put on a tmpfs of its own (``RunJob.disk_bytes``) until released.
_ON_TMPFS: dict[int, str] = {}
#: compiler caches of a job: environment variable -> folder under the job's cache.
CACHE_VARS = {"TRITON_CACHE_DIR": "triton", "TRITON_HOME": "triton-home", "TORCHINDUCTOR_CACHE_DIR": "inductor",
              "TORCH_EXTENSIONS_DIR": "torch_extensions", "XDG_CACHE_HOME": "xdg", "CUDA_CACHE_PATH": "nv"}


def _release(jid: int) -> None:
    try:
        jobns.release_job_folder(_ON_TMPFS.pop(jid))
    except OSError as e:
        sys.stderr.write(f"kws fork server: job {jid}'s folder could not be released: {e}\n")


def _choose_device() -> tuple[str, bool]:
    forced = os.environ.get(childenv.DEVICE, "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced, forced == "cpu"
    import torch  # only the NVML-based availability check; no CUDA init

    return ("cuda", False) if torch.cuda.is_available() else ("cpu", True)


def _optional_versions() -> dict[str, str]:
    """Versions of the optional backends that can run here (module doc), without importing
    JAX."""
    import importlib.metadata
    import importlib.util

    out: dict[str, str] = {}
    if importlib.util.find_spec("jax") is not None and importlib.util.find_spec("jaxlib") is not None:
        try:
            out["jax"] = importlib.metadata.version("jax")
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        import nki  # the PyPI placeholder raises ImportError here

        if hasattr(nki, "simulate_kernel"):
            out["nki"] = str(getattr(nki, "__version__", "unknown"))
    except Exception:  # noqa: BLE001  (no usable NKI: the entry stays absent)
        pass
    return out


def _preload_for(req: control.RunJob, state: dict[str, Any]) -> None:
    """Import JAX into the server before forking a job whose task uses it (once)."""
    if state.get("jax_loaded") or "jax" not in state.get("versions", {}):
        return
    try:
        from workstation.harness import pallas

        if pallas.jax_wanted(read_job(req.job).task_dir):
            state["jax_loaded"] = pallas.install()
    except Exception:  # noqa: BLE001  (the child imports JAX itself then)
        state["jax_loaded"] = True


# -- in the job process ----------------------------------------------------------------------

def _apply_limits(limits: dict[str, int | None]) -> None:
    """Resource limits of a job: each one is ``min(kws's value, the inherited hard
    limit)``, so an inherited ``ulimit`` lower than kws's still holds and never makes
    ``setrlimit`` fail."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in (("fsize", resource.RLIMIT_FSIZE), ("as", resource.RLIMIT_AS)):
        want = limits.get(key)
        if not want:
            continue
        _, hard = resource.getrlimit(which)
        value = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))


def _job_environment(req: control.RunJob) -> None:
    """``HOME`` and the compiler caches of this job (one per task run and principal)."""
    home = req.home
    if home:
        os.makedirs(home, exist_ok=True)
        os.environ["HOME"] = home
    root = req.cache_root
    if root:
        for var, sub in CACHE_VARS.items():
            os.makedirs(os.path.join(root, sub), exist_ok=True)
            os.environ[var] = os.path.join(root, sub)


def _run_in_job(req: control.RunJob, channel: tuple[int, int]) -> None:
    """In the job process: limits, stdio to files, run the job; never returns."""
    # CPython ignores SIGXFSZ (writes then fail with EFBIG); restore the default so that a
    # stdout/stderr flood past the file-size limit ends the child with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _apply_limits(req.limits)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:  # the memory cgroup's OOM killer picks jobs first
            f.write("1000")
    except OSError:
        pass
    _job_environment(req)
    job = read_job(req.job)
    out_dir = job.out_dir
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    so = os.open(os.path.join(out_dir, "stdout.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    se = os.open(os.path.join(out_dir, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(so, 1)
    os.dup2(se, 2)
    for fd in (devnull, so, se):
        if fd > 2:
            os.close(fd)
    sys.stdin = open(0)
    os.chdir(req.cwd)
    code = 0
    try:
        import workstation.harness as harness

        harness.CHANNEL = channel
        harness.run_job(job)
    except BaseException:  # noqa: BLE001  (the harness reports step errors itself)
        import traceback

        traceback.print_exc()
        code = 70
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _namespaced_child(req: control.RunJob, ctl_w: int, ack_r: int) -> None:
    """The job process of a namespaced job (``MODE=bwrap``), just forked into its pid
    namespace (:class:`~workstation.harness.jobns.PidNamespaces`): its own session, mount,
    IPC, network and UTS namespaces, the job's file-system view, every capability dropped,
    then the job; never returns."""
    try:
        os.setsid()
        jobns.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != 0:  # re-parented to the init: the server ended before the line above
            os._exit(111)
        jobns.unshare(jobns.JOB_OWN_NAMESPACES)
        jobns.close_fds({ctl_w, ack_r})
        jobns.detach_stdio()
        jobns.enter_job_view(req.jobdir, req.cache, req.tmp_bytes, req.shm_bytes)
        jobns.drop_privileges()
        jobns.deny_keyrings()
    except BaseException as e:  # noqa: BLE001  (the job must not run task code unconfined)
        try:
            os.write(2, f"kws: the job's sandbox could not be set up: {e}\n".encode())
        finally:
            os._exit(112)
    _run_in_job(req, (ctl_w, ack_r))


def _plain_child(req: control.RunJob, ctl_w: int, ack_r: int) -> None:
    """A job without namespaces (``MODE=none``): its own session; never returns."""
    os.setsid()
    try:
        jobns.set_parent_death_signal(signal.SIGKILL)
    except OSError:
        pass
    jobns.close_fds({ctl_w, ack_r})
    jobns.detach_stdio()
    _run_in_job(req, (ctl_w, ack_r))


# -- the server ------------------------------------------------------------------------------

def _isolate_server() -> str:
    """Before anything large is imported (its forks must be small): the pid-namespace
    nursery (``MODE=bwrap``), or the subreaper and parent-death signal (``MODE=none``).
    Returns why the nursery could not start ("" when it did or is not needed)."""
    global _PIDNS
    if _MODE == "bwrap":
        try:
            _PIDNS = jobns.PidNamespaces()
        except OSError as e:
            return f"the pid-namespace nursery could not start: {e}"
    if _MODE == "none":
        try:
            jobns.set_child_subreaper()
            jobns.set_parent_death_signal(signal.SIGKILL)
        except OSError:
            pass
    return ""


def _import_everything() -> dict[str, str]:
    """Import torch, triton and the harness (every module, :func:`workstation.harness.load_plugins`)
    into the server; returns the versions the ``Ready`` message names."""
    import numpy  # noqa: F401
    import torch

    versions = {"torch": torch.__version__.split("+")[0], "python": sys.version.split()[0]}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    import workstation
    import workstation.harness

    workstation.harness.load_plugins()  # preload the harness and its step modules

    versions["kws"] = workstation.__version__
    versions.update(_optional_versions())
    return versions


def _prepare_and_watch(interpret: bool, versions: dict[str, str]) -> WatchTable:
    """kws's own patches of the interpreter (and the CUDA emulation, ``versions["cuda-emu"]``),
    then the table of watched namespaces the jobs are checked against, with the verifier's
    self-test (a table that is off says why)."""
    from workstation.harness import core, state

    core.prepare_interpreter()  # kws's own patches belong to the baseline the jobs are checked against
    if interpret:
        from workstation.harness import cuda_emu

        if cuda_emu.install():  # CUDA extensions compiled as host code (the cuda_emulation setting, g++)
            versions["cuda-emu"] = cuda_emu.gxx_version() or "g++"
    table = WatchTable.build(state.MODULES, state.CLASSES)
    if table.ok:
        problem = serverchecks.selftest_verifier(table)
        if problem:
            table = WatchTable([], problem)
    return table


def main() -> None:
    global _MODE
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    _MODE = sys.argv[2] if len(sys.argv) > 2 else "none"
    if nice:
        os.nice(nice)
    nursery_problem = _isolate_server()
    device, interpret = _choose_device()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    versions = _import_everything()
    preload: dict[str, Any] = {"versions": versions}
    if device == "cuda":
        label = "cuda"
    else:
        label = "cpu (triton interpreter)" if "triton" in versions else "cpu"
    jobns_problem = ""
    if _MODE == "bwrap":
        jobns_problem = nursery_problem or (serverchecks.selftest_namespaces(_PIDNS) if _PIDNS is not None
                                            else "no pid-namespace nursery")
    table = _prepare_and_watch(interpret, versions)
    emit(control.Ready(device=device, label=label, interpreter=interpret, versions=versions, mode=_MODE,
                       jobns=jobns_problem, verifier=table.reason, watched=table.entry_count(),
                       limits=serverchecks.limits_in_force()))
    _Server(table, preload).serve()


class _Server:
    """The request loop: reads the runner's requests on stdin (unbuffered: ``select()``
    reports the fd, so a buffered ``readline()`` could pull two requests from the pipe and
    leave the second in Python's buffer, unseen by the next ``select()``), each running
    job's channel, and reaps ended jobs; ends when stdin is closed and no job is left."""

    def __init__(self, table: WatchTable, preload: dict[str, Any]) -> None:
        self.table = table
        self.preload = preload
        self.jobs: dict[int, ServerJob] = {}     # forked pid -> job
        self.by_id: dict[int, ServerJob] = {}
        self.pending = b""
        self.open_in = True
        self.last_sweep = time.monotonic()

    def serve(self) -> None:
        while self.open_in or self.jobs:
            fds = ([0] if self.open_in else []) + [j.ctl for j in self.jobs.values() if j.ctl >= 0]
            busy = any(j.pending() for j in self.jobs.values())
            r, _, _ = select.select(fds, [], [], 0 if busy else 0.02)
            for j in [j for j in self.jobs.values() if j.ctl in r]:
                read_channel(j)
            for j in list(self.jobs.values()):
                handle_lines(j, self.table)
            if 0 in r:
                self._read_requests()
            self._end_hostile()
            self._reap()
            if _MODE == "none" and time.monotonic() - self.last_sweep > 0.5:
                self.last_sweep = time.monotonic()
                procs.sweep_orphans(set(self.jobs))

    def _end_hostile(self) -> None:
        """Kill, at once, every job that broke its channel's protocol, and every job whose
        channel closed while its process lives on (:mod:`workstation.harness.custody`)."""
        now = time.monotonic()
        for j in self.jobs.values():
            if j.closed_at is not None and not j.end and now - j.closed_at > CLOSED_GRACE_S:
                end_job(j, "the job closed its channel to kws's fork server while it ran (task code on kws's "
                           "channel)")
            if j.end and not j.killed:
                _kill(j)

    def _read_requests(self) -> None:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            self.open_in = False
            for j in self.jobs.values():  # the parent is gone: nothing may outlive it
                _kill(j)
        self.pending += chunk
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                req = control.decode_to_server(line)
            except msgspec.DecodeError as e:
                sys.stderr.write(f"kws fork server: a request that is no control message: {e}\n")
                continue
            self._handle(req)

    def _handle(self, req: control.ToServer) -> None:
        if isinstance(req, control.RunJob):
            _preload_for(req, self.preload)
            j = _start(req)
            self.jobs[j.pid] = self.by_id[j.id] = j
            emit(control.Started(id=j.id))
        elif isinstance(req, control.KillJob) and req.id in self.by_id:
            _kill(self.by_id[req.id])
        elif isinstance(req, control.ReleaseJob) and req.id in _ON_TMPFS and req.id not in self.by_id:
            _release(req.id)
        elif isinstance(req, control.CpuAsk) and req.id in self.by_id:
            emit(control.CpuUsage(id=req.id, seq=req.seq, **self.by_id[req.id].usage()))

    def _reap(self) -> None:
        while self.jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            j = self.jobs.pop(pid) if pid in self.jobs else None
            if j is not None:  # else an orphan re-parented to this subreaper
                self._ended(j, status)

    def _ended(self, j: ServerJob, status: int) -> None:
        for _ in range(64):  # the last messages (verifications); a helper still writing is cut off
            if j.ctl < 0:
                break
            rr, _, _ = select.select([j.ctl], [], [], 0)
            if not rr:
                break
            handle_channel(j, self.table)
        if j.ctl >= 0:
            os.close(j.ctl)
        os.close(j.ack)
        self.by_id.pop(j.id, None)
        try:
            os.killpg(j.pid, signal.SIGKILL)  # stray processes of its session
        except OSError:
            pass
        if j.init:  # and of its pid namespace (the kernel kills them with its init)
            procs.kill_quietly(j.init)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        emit(control.Exited(id=j.id, status=code, killed=j.killed, ended=j.end))


def _start(req: control.RunJob) -> ServerJob:
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    init, problem = 0, ""
    if _MODE == "none":
        pid = os.fork()
    else:
        try:
            if req.disk_bytes > 0:
                jobns.job_folder_on_tmpfs(req.jobdir, req.disk_bytes)
                _ON_TMPFS[req.id] = req.jobdir
            init = _new_pid_namespace()
            pid = _pidns().fork_into(init)
        except OSError as e:
            problem = str(e)
            pid = os.fork()
    if pid == 0:
        try:
            os.close(ctl_r)
            os.close(ack_w)
            if problem:  # runs no task code: the job ends as one whose sandbox failed
                os.write(2, f"kws: {problem}\n".encode())
                os._exit(113)
            if _MODE == "none":
                _plain_child(req, ctl_w, ack_r)
            else:
                _namespaced_child(req, ctl_w, ack_r)
        finally:
            os._exit(114)
    os.close(ctl_w)
    os.close(ack_r)
    os.set_blocking(ack_w, False)  # an answer the job does not take never blocks the server
    if problem and init:
        procs.kill_quietly(init)
    return ServerJob(req.id, pid, ctl_r, ack_w, req.steps, 0 if problem else init, os.path.join(req.jobdir, "out"))


def _pidns() -> jobns.PidNamespaces:
    """The pid-namespace nursery.

    Raises:
        OSError: there is none.
    """
    if _PIDNS is None:
        raise OSError(0, "no pid-namespace nursery")
    return _PIDNS


def _new_pid_namespace() -> int:
    """A pid namespace for the next job (its init's pid). A nursery that is gone (killed
    from outside) is replaced once per request by a fork of the server: correct, but each
    namespace then costs a fork of the large server.

    Raises:
        OSError: no namespace could be made.
    """
    global _PIDNS
    nursery = _pidns()
    try:
        return nursery.new()
    except jobns.NurseryGone:
        nursery.close()
        _PIDNS = jobns.PidNamespaces()
        return _PIDNS.new()


def _kill(j: ServerJob) -> None:
    j.killed = True
    try:
        os.killpg(j.pid, signal.SIGKILL)
    except OSError:
        pass
    for target in (j.pid, j.init):
        if target:
            procs.kill_quietly(target)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown of torch/triton: the runner waits for this exit
