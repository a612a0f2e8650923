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
job (see *CPU time*) and ``Exited`` (``status``: the job process's exit code, or minus the
signal that ended it; ``killed`` when the server killed it on request). A request line
that does not decode is ignored (and named on the server's stderr).

CPU time: ``cpu_s`` is the CPU seconds (user + system) every process of the job has used
so far, read from ``/proc/<pid>/stat``: the job process, its descendants, whatever was
re-parented to the job's pid-namespace init, and (through each process's ``cutime`` /
``cstime``) every child they have already reaped. The runner's step budgets are in these
seconds, so a loaded machine slows a job without changing what stops it. The harness marks
the import of a task file on its channel (``I 1`` before, ``I 0`` after;
:func:`workstation.harness.import_phase`); the server adds the CPU and wall seconds between
the two marks to ``import_cpu_s`` / ``import_wall_s`` (an import still running counts up to
now; ``importing`` says one is), which the runner charges to the job's import budget instead
of the step's.

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
and the parent refuses every step of the job.

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

import hashlib
import os
import resource
import select
import signal
import stat
import sys
import time
from typing import Any

import msgspec

from workstation.protocol import childenv, control
from workstation.protocol.steps import read_job

#: seconds the server waits for every process of a job to stop at a hand-over.
FREEZE_TIMEOUT_S = 2.0
_MODE = "none"
#: the pid-namespace maker of ``MODE=bwrap`` (made before torch is imported).
_PIDNS: Any = None
#: job id -> its folder, put on a tmpfs of its own (``RunJob.disk_bytes``) until released.
_ON_TMPFS: dict[int, str] = {}


def _release(jid: int) -> None:
    from workstation.harness import jobns

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


def _preload_for(req: control.RunJob, state: dict) -> None:
    """Import JAX into the server before forking a job whose task uses it (once)."""
    if state.get("jax_loaded") or "jax" not in state.get("versions", {}):
        return
    try:
        from workstation.harness import pallas

        if pallas.jax_wanted(read_job(req.job).task_dir):
            state["jax_loaded"] = pallas.install()
    except Exception:  # noqa: BLE001  (the child imports JAX itself then)
        state["jax_loaded"] = True


def _emit(msg: control.FromServer) -> None:
    sys.stdout.buffer.write(control.encode(msg))
    sys.stdout.flush()


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


#: compiler caches of a job: environment variable -> folder under the job's cache.
CACHE_VARS = {"TRITON_CACHE_DIR": "triton", "TRITON_HOME": "triton-home", "TORCHINDUCTOR_CACHE_DIR": "inductor",
              "TORCH_EXTENSIONS_DIR": "torch_extensions", "XDG_CACHE_HOME": "xdg", "CUDA_CACHE_PATH": "nv"}


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
    from workstation.harness import jobns

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
    except BaseException as e:  # noqa: BLE001  (the job must not run task code unconfined)
        try:
            os.write(2, f"kws: the job's sandbox could not be set up: {e}\n".encode())
        finally:
            os._exit(112)
    _run_in_job(req, (ctl_w, ack_r))


def _plain_child(req: control.RunJob, ctl_w: int, ack_r: int) -> None:
    """A job without namespaces (``MODE=none``): its own session; never returns."""
    from workstation.harness import jobns

    os.setsid()
    try:
        jobns.set_parent_death_signal(signal.SIGKILL)
    except OSError:
        pass
    jobns.close_fds({ctl_w, ack_r})
    jobns.detach_stdio()
    _run_in_job(req, (ctl_w, ack_r))


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


class _Job:
    def __init__(self, jid: int, pid: int, ctl: int, ack: int, steps: int, init: int = 0, out_dir: str = ""):
        self.id = jid
        self.pid = pid          # the job process (the server's child in both modes)
        self.init = init        # pid 1 of its pid namespace (MODE=bwrap), else 0
        self.target = pid       # the process whose memory is verified
        self.ctl = ctl
        self.ack = ack
        self.buf = b""
        self.killed = False
        self.steps = max(1, steps)
        #: the next step a hand-over (``V``) is counted as (module doc, *Custody*).
        self.next_step = 0
        #: why the job's custody is broken ("" while it holds): reported once.
        self.broken = ""
        #: the job's output folder as the server sees it.
        self.out_dir = out_dir
        #: CPU and wall seconds of finished import phases, and the start of a running one.
        self.import_cpu = 0.0
        self.import_wall = 0.0
        self.import_since: tuple[float, float] | None = None

    def cpu(self) -> float:
        return job_cpu_seconds((self.pid, self.init))

    def mark_import(self, begin: bool) -> None:
        """An ``I 1`` / ``I 0`` mark from the job (module doc, *CPU time*)."""
        now_cpu, now_wall = self.cpu(), time.monotonic()
        if begin and self.import_since is None:
            self.import_since = (now_cpu, now_wall)
        elif not begin and self.import_since is not None:
            cpu0, wall0 = self.import_since
            self.import_cpu += max(0.0, now_cpu - cpu0)
            self.import_wall += max(0.0, now_wall - wall0)
            self.import_since = None

    def usage(self) -> dict[str, Any]:
        """The answer to a ``cpu`` request (module doc)."""
        cpu = self.cpu()
        imp_cpu, imp_wall = self.import_cpu, self.import_wall
        if self.import_since is not None:
            imp_cpu += max(0.0, cpu - self.import_since[0])
            imp_wall += max(0.0, time.monotonic() - self.import_since[1])
        return {"cpu_s": round(cpu, 3), "import_cpu_s": round(imp_cpu, 3), "import_wall_s": round(imp_wall, 3),
                "importing": self.import_since is not None}


def _stop_and_wait(pid: int, timeout: float = 2.0) -> bool:
    """Send SIGSTOP to ``pid`` and wait until it is stopped (its state in /proc is T)."""
    os.kill(pid, signal.SIGSTOP)
    return _wait_stopped([pid], time.monotonic() + timeout) == []


def _wait_stopped(pids: list[int], deadline: float) -> list[int]:
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


def _children(pid: int) -> list[int]:
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


def _job_processes(job: _Job) -> list[int]:
    """Every process of the job: the job process, its descendants, and whatever was
    re-parented to the job's pid-namespace init (not the init itself). Read from the
    kernel's children lists, not a scan of all of ``/proc`` (a few reads per process)."""
    todo = [job.pid] + (_children(job.init) if job.init else [])
    seen: list[int] = []
    while todo:
        pid = todo.pop()
        if pid in seen or pid == job.init:
            continue
        seen.append(pid)
        todo.extend(_children(pid))
    return seen


def _freeze(job: _Job) -> tuple[list[int], str]:
    """Stop every process of the job (``SIGSTOP``), looking again until no new one appears
    (a process forking while it is stopped). Returns the stopped pids and "" or why the job
    could not be stopped whole."""
    stopped: list[int] = []
    for _ in range(50):
        new = [p for p in _job_processes(job) if p not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                continue
            stopped.append(pid)
    else:
        return stopped, "the job kept making processes while kws stopped it"
    left = _wait_stopped(stopped, time.monotonic() + FREEZE_TIMEOUT_S)
    if job.target in left or job.target not in stopped:
        return stopped, "the job could not be stopped for the check"
    if left:
        return stopped, f"{len(left)} process(es) of the job could not be stopped for the check"
    return stopped, ""


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


def _file_sha256(path: str) -> str | None:
    """sha256 of the regular file ``path`` (never following a symlink); None when there is
    none. Raises OSError for anything that is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{os.path.basename(path)} is not a regular file")
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
        return h.hexdigest()


def _custody(job: _Job, step: int, claimed: tuple[str, str]) -> tuple[str, str, str]:
    """(json sha256, npz sha256, problem) of step ``step``'s files as they are now (the
    job stopped): module doc, *Custody*."""
    base = os.path.join(job.out_dir, f"step-{step}")
    try:
        js, nz = _file_sha256(base + ".json"), _file_sha256(base + ".npz")
    except OSError as e:
        return "", "", f"its result files could not be read: {e}"
    js, nz = js or "", nz or control.NO_ARRAYS
    if not js:
        return js, nz, (f"step-{step}.json was not there when step {step} was handed over to kws (a hand-over "
                        "sent before the step ended: task code on kws's channel)")
    if os.path.lexists(os.path.join(job.out_dir, f"step-{step + 1}.start")):
        return js, nz, (f"step {step + 1} had already begun when step {step} was handed over to kws (task code "
                        "on kws's channel)")
    if (js, nz) != claimed:
        which = f"step-{step}.json" if js != claimed[0] else f"step-{step}.npz"
        return js, nz, (f"{which} on disk does not match the step's hand-over (rewritten after kws's harness wrote "
                        "it, or the hand-over did not come from kws's harness)")
    return js, nz, ""


def _verify(job: _Job, step: int, claimed: tuple[str, str], table: Any) -> None:
    changes: list[str] | None = None
    error = problem = ""
    js = nz = ""
    frozen, why = _freeze(job)
    try:
        if why:
            error = problem = why
        else:
            js, nz, problem = _custody(job, step, claimed)
            if table is None or not table.ok:
                error = table.reason if table is not None else "no watch table"
            else:
                from workstation.harness.watch import VerifyError

                try:
                    changes = table.verify(job.target)
                except (VerifyError, OSError) as e:
                    error = str(e)
    finally:
        _thaw(frozen)
    _emit(control.Verified(id=job.id, step=step, changes=changes, error=error, custody=problem,
                           json_sha256=js, npz_sha256=nz))


def _break_custody(job: _Job, why: str) -> None:
    """Report, once, that the job's custody is broken (every step refused)."""
    if not job.broken:
        job.broken = why
        _emit(control.Verified(id=job.id, step=job.steps, custody=why))


def _handle_ctl(job: _Job, table: Any) -> None:
    try:
        chunk = os.read(job.ctl, 4096)
    except OSError:
        chunk = b""
    if not chunk:
        os.close(job.ctl)
        job.ctl = -1
        return
    job.buf += chunk
    if len(job.buf) > 65536:  # a flood: stop reading it
        job.buf = b""
        _break_custody(job, "a flood of bytes came on the job's channel to kws's fork server (task code wrote on it)")
        return
    while b"\n" in job.buf:
        line, job.buf = job.buf.split(b"\n", 1)
        msg = control.parse_job_line(line)
        if msg is None:
            _break_custody(job, "a line kws's harness never writes came on the job's channel to kws's fork server "
                                f"({line[:60]!r}: task code wrote on it)")
            continue
        op, arg = msg
        if op == "I":
            job.mark_import(arg)
            continue
        step, job.next_step = job.next_step, job.next_step + 1
        if job.broken:
            pass
        elif step >= job.steps:
            _break_custody(job, f"more steps were handed over to kws than the job's {job.steps} (task code sent "
                                "hand-overs on kws's channel)")
        else:
            _verify(job, step, arg, table)
        try:
            os.write(job.ack, b"k")
        except OSError:
            pass


def _selftest_namespaces() -> str:
    """Set up one job's namespaces as :func:`_start` does (a pid namespace from the nursery,
    the job process forked into it, its view, privileges dropped) and check what the job
    sees: pid 2 with a parent outside its namespace, only its namespace's processes in
    ``/proc``, no capability, the init's memory unreadable. "" when all holds, else why not."""
    from workstation.harness import jobns

    os.makedirs("/tmp/kws-selftest", exist_ok=True)
    r, w = os.pipe()
    init = 0
    try:
        init = _PIDNS.new()
        pid = _PIDNS.fork_into(init)
    except OSError as e:
        if init:
            os.kill(init, signal.SIGKILL)
        return f"the job namespaces could not be made: {e}"
    if pid == 0:
        os.close(r)
        try:
            os.setsid()
            jobns.unshare(jobns.JOB_OWN_NAMESPACES)
            jobns.enter_job_view("/tmp/kws-selftest", None)
            jobns.drop_privileges()
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
            if problems:
                os.write(w, ("; ".join(problems)).encode()[:500])
                os._exit(3)
            os._exit(0)
        except BaseException as e:  # noqa: BLE001
            os.write(w, str(e).encode()[:500])
            os._exit(4)
    os.close(w)
    _, st = os.waitpid(pid, 0)
    os.kill(init, signal.SIGKILL)
    text = os.read(r, 1000).decode(errors="replace")
    os.close(r)
    code = os.waitstatus_to_exitcode(st)
    if code == 0:
        return ""
    return text or f"the namespace self-test exited with {code}"


def _selftest_verifier(table: Any) -> str:
    """Fork a child that patches ``time.perf_counter`` and check that the verifier sees
    it: "" when it does, else why not (e.g. ptrace restricted by Yama)."""
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
        if not _stop_and_wait(pid):
            return "the verifier's self-test child could not be stopped"
        from workstation.harness.watch import VerifyError

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


def _limits_in_force() -> dict[str, list[int]]:
    out = {}
    for name in ("AS", "DATA", "FSIZE", "NOFILE", "NPROC", "STACK"):
        soft, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
        out[name.lower()] = [soft, hard]
    return out


def main() -> None:
    global _MODE, _PIDNS
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    _MODE = sys.argv[2] if len(sys.argv) > 2 else "none"
    if nice:
        os.nice(nice)
    from workstation.harness import jobns

    nursery_problem = ""
    if _MODE == "bwrap":  # before anything large is imported: its forks must be small
        try:
            _PIDNS = jobns.PidNamespaces()
        except OSError as e:
            nursery_problem = f"the pid-namespace nursery could not start: {e}"
    if _MODE == "none":
        try:
            jobns.set_child_subreaper()
            jobns.set_parent_death_signal(signal.SIGKILL)
        except OSError:
            pass
    device, interpret = _choose_device()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
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
    preload = {"versions": versions}
    if device == "cuda":
        label = "cuda"
    else:
        label = "cpu (triton interpreter)" if "triton" in versions else "cpu"
    jobns_problem = (nursery_problem or _selftest_namespaces()) if _MODE == "bwrap" else ""
    from workstation.harness import core, state, watch

    core.prepare_interpreter()  # kws's own patches belong to the baseline the jobs are checked against
    if interpret:
        from workstation.harness import cuda_emu

        if cuda_emu.install():  # CUDA extensions compiled as host code (the cuda_emulation setting, g++)
            versions["cuda-emu"] = cuda_emu.gxx_version() or "g++"

    table = watch.WatchTable.build(state.MODULES, state.CLASSES)
    if table.ok:
        problem = _selftest_verifier(table)
        if problem:
            table = watch.WatchTable([], problem)
    _emit(control.Ready(device=device, label=label, interpreter=interpret, versions=versions, mode=_MODE,
                        jobns=jobns_problem, verifier=table.reason, watched=table.entry_count(),
                        limits=_limits_in_force()))
    _serve(table, preload)


def _serve(table: Any, preload: dict) -> None:
    jobs: dict[int, _Job] = {}     # forked pid -> job
    by_id: dict[int, _Job] = {}
    # Read stdin unbuffered: select() reports the fd, so a buffered readline() could pull
    # two requests from the pipe and leave the second in Python's buffer, unseen by the
    # next select() (a job that never starts when two are submitted at once).
    pending = b""
    open_in = True
    last_sweep = time.monotonic()
    while open_in or jobs:
        fds = ([0] if open_in else []) + [j.ctl for j in jobs.values() if j.ctl >= 0]
        r, _, _ = select.select(fds, [], [], 0.02)
        for j in [j for j in jobs.values() if j.ctl in r]:
            _handle_ctl(j, table)
        if 0 in r:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                open_in = False
                for j in jobs.values():  # the parent is gone: nothing may outlive it
                    _kill(j)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if not line.strip():
                    continue
                try:
                    req = control.decode_to_server(line)
                except msgspec.DecodeError as e:
                    sys.stderr.write(f"kws fork server: a request that is no control message: {e}\n")
                    continue
                if isinstance(req, control.RunJob):
                    _preload_for(req, preload)
                    j = _start(req)
                    jobs[j.pid] = by_id[j.id] = j
                    _emit(control.Started(id=j.id))
                elif isinstance(req, control.KillJob) and req.id in by_id:
                    _kill(by_id[req.id])
                elif isinstance(req, control.ReleaseJob) and req.id in _ON_TMPFS and req.id not in by_id:
                    _release(req.id)
                elif isinstance(req, control.CpuAsk) and req.id in by_id:
                    _emit(control.CpuUsage(id=req.id, seq=req.seq, **by_id[req.id].usage()))
        while jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            j = jobs.pop(pid, None)
            if j is None:
                continue  # an orphan re-parented to this subreaper
            while j.ctl >= 0:  # the last messages (verifications, the exit status)
                rr, _, _ = select.select([j.ctl], [], [], 0)
                if not rr:
                    break
                _handle_ctl(j, table)
            if j.ctl >= 0:
                os.close(j.ctl)
            os.close(j.ack)
            by_id.pop(j.id, None)
            try:
                os.killpg(j.pid, signal.SIGKILL)  # stray processes of its session
            except OSError:
                pass
            if j.init:  # and of its pid namespace (the kernel kills them with its init)
                try:
                    os.kill(j.init, signal.SIGKILL)
                except OSError:
                    pass
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            _emit(control.Exited(id=j.id, status=code, killed=j.killed))
        if _MODE == "none" and time.monotonic() - last_sweep > 0.5:
            last_sweep = time.monotonic()
            _sweep_orphans(set(jobs))


def _start(req: control.RunJob) -> _Job:
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    init, problem = 0, ""
    if _MODE == "none":
        pid = os.fork()
    else:
        try:
            if req.disk_bytes > 0:
                from workstation.harness import jobns

                jobns.job_folder_on_tmpfs(req.jobdir, req.disk_bytes)
                _ON_TMPFS[req.id] = req.jobdir
            init = _new_pid_namespace()
            pid = _PIDNS.fork_into(init)
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
    if problem and init:
        try:
            os.kill(init, signal.SIGKILL)
        except OSError:
            pass
    return _Job(req.id, pid, ctl_r, ack_w, req.steps, 0 if problem else init, os.path.join(req.jobdir, "out"))


def _new_pid_namespace() -> int:
    """A pid namespace for the next job (its init's pid). A nursery that is gone (killed
    from outside) is replaced once per request by a fork of the server: correct, but each
    namespace then costs a fork of the large server.

    Raises:
        OSError: no namespace could be made.
    """
    global _PIDNS
    from workstation.harness import jobns

    if _PIDNS is None:
        raise OSError(0, "no pid-namespace nursery")
    try:
        return _PIDNS.new()
    except jobns.NurseryGone:
        _PIDNS.close()
        _PIDNS = jobns.PidNamespaces()
        return _PIDNS.new()


def _kill(j: _Job) -> None:
    j.killed = True
    try:
        os.killpg(j.pid, signal.SIGKILL)
    except OSError:
        pass
    for target in (j.pid, j.init):
        if target:
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass


def _sweep_orphans(running: set[int]) -> None:
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
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown of torch/triton: the runner waits for this exit
