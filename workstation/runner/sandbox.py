"""Parent side of the isolated runner: the sandboxed fork server, jobs, limits, kills.

Isolation (``sandbox="bwrap"``, the default; see :mod:`workstation.runner.bwrap` and
:mod:`workstation.harness.jobns`):

- the fork server runs inside a bubblewrap sandbox (new user, pid, IPC, UTS, network
  namespaces; the system read-only; nothing of the reviewer's home, the queue or kws's
  processes visible; ``--die-with-parent``, ``--new-session``), optionally in a memory
  cgroup (:mod:`workstation.runner.cgroup`);
- every job is pid 1 of its own pid namespace with its own mount, IPC, network and UTS
  namespaces, a private ``/tmp`` and ``HOME``, sees only its own copy of the task folder
  and its task's and role's compiler cache, and has no capabilities; each place it can
  write is a size-capped tmpfs of its own (its job folder, ``/tmp``, ``/dev/shm``,
  ``/var/tmp``: the ``job_disk_bytes``, ``job_tmp_bytes`` and ``job_shm_bytes``
  settings), the job folder mounted by the fork server and read here through its view
  (``/proc/<server>/root``);
- jobs of one *principal* only: the runner runs steps of one role (``candidate``,
  ``reference``, ...) per job (:func:`workstation.protocol.steps.principal`), so a
  candidate job and a reference job never share a process, a file or a namespace;
- compiler caches (Triton, inductor, ``TORCH_EXTENSIONS_DIR``) are one per task run and
  principal (``cache_key``), under the run's folder, deleted with it;
- a scrubbed environment (an allow-list: no tokens, no ``SSH_AUTH_SOCK``, no cloud
  credentials), see :func:`child_env`;
- resource limits: no core files, a cap on file size (stdout/stderr floods end with
  ``SIGXFSZ``), a cap on address space on the CPU, a cap on open files, each the smaller of
  kws's value and the inherited one; a lower CPU priority (``nice``);
- a job is killed whole at its limits; when kws exits (even by ``SIGKILL``) the sandbox
  and everything in it ends;
- step budgets are CPU seconds (user + system) of every process of the job, as the fork
  server reads them from ``/proc`` (:func:`workstation.harness.forkserver.job_cpu_seconds`),
  so a loaded machine slows a job without changing what stops it; the imports of task files
  are charged to the job's import budget instead (the ``import_budget`` setting); a
  wall-clock backstop (:func:`wall_backstop`: 10 x the CPU budget + 30 s) bounds a step that
  waits without computing, and what it alone stops has limit ``"wall"``, never ``"step"``;
- the task folder is copied without following it anywhere (:mod:`workstation.runner.taskcopy`);
  results are read as hostile input, bounded per job (:mod:`workstation.protocol.wire`);
- custody: after every step the fork server stops the whole job, checks it from outside
  (:mod:`workstation.harness.watch`) and records the sha256 of the step's result files
  (:mod:`workstation.protocol.control`); the runner reads each file once and uses it only
  with those bytes. A result written after kws's harness was patched, without that
  hand-over, or rewritten after it, is refused (``forged``), never judged.

``sandbox="none"`` (``--no-sandbox``, or ``sandbox = "none"`` in the user config; see
:mod:`workstation.runner.policy`) keeps the copies, the environment, the limits and the
checks from outside, but task code then runs as the reviewer with their file system in
view; every report says ``"sandbox": "none"``.

The job file is a :class:`workstation.protocol.steps.Job`, encoded and checked against its
type (:func:`~workstation.protocol.steps.encode_job`) before the child is asked to start.
"""

from __future__ import annotations

import os
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation import settings
from workstation.protocol import childenv, control
from workstation.protocol.steps import Job, Step, encode_job
from workstation.protocol.wire import (
    Budget,
    StepResult,
    WireError,
    exists,
    forging_changes,
    open_dir,
    read_step,
    read_tail,
)
from workstation.runner import bwrap, cgroup, taskcopy
from workstation.runner.admission import Admission
from workstation.runner.policy import sandbox_mode

#: environment variables a child may inherit (everything else is dropped).
ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_LAUNCH_BLOCKING",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
)
STDIO_LIMIT_BYTES = 256 * 1024 * 1024
CPU_ADDRESS_SPACE_BYTES = 24 * 1024 ** 3
TAIL_BYTES = 8192
READY_TIMEOUT_S = 120.0
#: seconds a killed job has to be reported gone before the runner gives up on the server.
KILL_GRACE_S = 10.0
#: the wall-clock backstop of a CPU budget of b seconds is WALL_FACTOR * b + WALL_SLACK_S
#: (:func:`wall_backstop`): a loaded machine may slow a job tenfold before it stops it.
WALL_FACTOR = 10.0
WALL_SLACK_S = 30.0
#: how often the runner asks the fork server for a running job's CPU seconds.
CPU_POLL_S = 0.2


def wall_backstop(cpu_budget_s: float) -> float:
    """The wall-clock seconds after which a step (or a job's imports) with a CPU budget of
    ``cpu_budget_s`` is stopped even though it has not used its CPU: a step that waits
    without computing (a deadlock, a sleep) or a machine too loaded to judge on. What this
    backstop alone stops is never called a hang (limit ``"wall"``)."""
    return WALL_FACTOR * cpu_budget_s + WALL_SLACK_S


class RunnerError(Exception):
    """The runner itself failed (the fork server would not start or died): kws's fault or
    its environment's, never a verdict on the task."""


class JobCancelled(Exception):  # a control-flow signal
    """A job's ``cancel`` hook said not to start it (after it waited for a slot)."""


class SandboxUnavailable(RunnerError):
    """bubblewrap is missing or cannot create its namespaces here (the message says how to
    install it and how to opt out)."""


@dataclass(frozen=True)
class DeviceInfo:
    """Where task code runs. ``kind``: ``"cuda"`` or ``"cpu"``; ``label`` is what reports
    print (``"cpu (triton interpreter)"``, ``"cuda (NVIDIA H200)"``); ``sandbox``:
    ``"bwrap"`` or ``"none"``; ``notes``: what the report should say about the isolation
    (memory cap, an inherited limit, the out-of-process check being off)."""

    kind: str
    label: str
    interpreter: bool
    versions: dict[str, str]
    name: str = ""
    sandbox: str = "none"
    verifier: bool = False
    notes: tuple[str, ...] = ()


@dataclass
class JobResult:
    """What happened to one job.

    ``status``: ``"ok"`` (exited 0 with every step's result), ``"exit"`` (exited before
    reporting every result: non-zero, or 0 from task code's ``os._exit``), ``"signal"``
    (killed by a signal it raised or received, e.g. SIGABRT, SIGSEGV, SIGXFSZ, or the
    memory cap's OOM kill), ``"timeout"`` (killed by kws at a limit).
    ``steps[i]`` is ``None`` for a step that never finished or whose result was refused
    (``forged[i]`` says why); ``died_in_step`` is the step running when the process died
    (or ``None``). ``limit`` names the limit that fired: ``"step"`` (the step's CPU budget,
    ``step_timeout_s``), ``"import"`` (the job's import CPU budget, ``import_budget_s``,
    while importing ``import_file``), ``"wall"`` (the wall-clock backstop,
    :func:`wall_backstop`), ``"job"`` (the job's wall-clock limit), ``"memory"``,
    ``"fsize"`` or ``""``. Only ``"step"`` says the code computed past its budget; ``"wall"``,
    ``"job"`` and ``"import"`` say nothing about a hang. ``cpu_s``: the job's CPU seconds at
    its last reading (``step_cpu_s``: of the step that was running, imports excluded;
    ``import_cpu_s``: of its imports). ``seconds``: wall time of the whole job.
    """

    status: str
    exit_code: int | None
    signal_name: str | None
    steps: list[StepResult | None]
    died_in_step: int | None
    seconds: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timeout_s: float = 0.0
    step_timeout_s: float | None = None
    limit: str = ""
    memory_note: str = ""
    wire_errors: list[str] = field(default_factory=list)
    forged: dict[int, str] = field(default_factory=dict)
    #: what the fork server saw changed after each forged step (the verifier's lines).
    forged_changes: dict[int, list[str]] = field(default_factory=dict)
    cpu_s: float | None = None
    step_cpu_s: float | None = None
    import_cpu_s: float | None = None
    import_budget_s: float | None = None
    import_file: str = ""

    @property
    def died(self) -> bool:
        return self.status != "ok"

    def describe_death(self) -> str:
        """One sentence for a job that did not end normally, naming the limit that fired."""
        if self.status == "timeout":
            if self.limit == "step" and self.step_timeout_s is not None:
                return (f"did not finish within its {self.step_timeout_s:g} CPU s step budget (KWS_STEP_TIMEOUT) "
                        "and was killed")
            if self.limit == "import":
                what = f"the import of {self.import_file}" if self.import_file else "the import of a task file"
                return (f"{what} did not finish within the job's {self.import_budget_s or 0:g} CPU s import budget "
                        "(KWS_IMPORT_BUDGET) and was stopped")
            if self.limit == "wall" and self.step_timeout_s is not None:
                used = f" after {self.step_cpu_s:.1f} CPU s" if self.step_cpu_s is not None else ""
                return (f"was stopped by the wall-clock backstop ({wall_backstop(self.step_timeout_s):g} s for its "
                        f"{self.step_timeout_s:g} CPU s budget){used}: it waited without computing, or the machine "
                        "was too loaded to judge it; not a hang")
            return f"did not finish within the job's {self.timeout_s:g} s wall-clock limit and was stopped"
        if self.status == "signal":
            extra = ""
            if self.signal_name == "SIGXFSZ":
                extra = f" (wrote more than {STDIO_LIMIT_BYTES // 2**20} MiB to stdout/stderr: the file-size limit)"
            elif self.limit == "memory":
                extra = f" (the kernel's OOM killer at the sandbox's {self.memory_note})"
            # a verb phrase, like the others: it follows a role ("the candidate crashed: ...")
            return f"crashed: its process died from {self.signal_name}{extra}"
        if self.status == "exit":
            return f"ended: its process exited with status {self.exit_code} before reporting a result"
        return "completed"


def kws_cache_dir() -> Path:
    """Per-user cache folder of kws's own data (never written by task code): the
    ``cache_dir`` setting (``KWS_CACHE_DIR``, else ``platformdirs.user_cache_dir("kws")``)."""
    return settings.current().cache_dir


def child_env(home: Path | str, device: str | None, *, pythonpath: str | None = None,
              cuda_visible: str | None = None) -> dict[str, str]:
    """The scrubbed environment of the fork server and its children.

    Only :data:`ENV_ALLOW` passes through. ``HOME`` is ``home`` (private), ``TMPDIR``
    ``/tmp``, one intra-op thread per child (jobs run in parallel),
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` so that asking whether CUDA exists does not
    initialise CUDA in the server (children are forked from it); the compiler caches are
    set per job (:meth:`Runner.run`). ``cuda_visible``: the ``CUDA_VISIBLE_DEVICES`` of
    the sandbox (the bound GPUs' UUIDs). Settings the child needs are resolved here and
    passed through :mod:`workstation.protocol.childenv`: ``device`` (when forced) and the
    ``input_budget``, ``test_stretch`` and ``cuda_emulation`` settings; ``child_threads`` becomes ``OMP_NUM_THREADS`` /
    ``MKL_NUM_THREADS``.

    Raises:
        Problem: a setting is malformed (:func:`workstation.settings.current`).
    """
    cfg = settings.current()
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    pkg_root = str(Path(__file__).resolve().parents[2])
    env.update(
        HOME=str(home),
        TMPDIR="/tmp",
        PYTHONPATH=pythonpath or pkg_root,
        PYTHONDONTWRITEBYTECODE="1",
        PYTORCH_NVML_BASED_CUDA_CHECK="1",
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        OMP_NUM_THREADS=str(cfg.child_threads),
        MKL_NUM_THREADS=str(cfg.child_threads),
        TRITON_DEFAULT_FP_FUSION=os.environ.get("TRITON_DEFAULT_FP_FUSION", "1"),
    )
    if cuda_visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible
    if device:
        env[childenv.DEVICE] = device
    if cfg.input_budget is not None:
        env[childenv.INPUT_BUDGET] = str(cfg.input_budget)
    if cfg.test_stretch > 1:
        env[childenv.STRETCH] = repr(cfg.test_stretch)
    env[childenv.CUDA_EMULATION] = "1" if cfg.cuda_emulation else "0"
    return env


def tree_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes under ``folder`` (symlinks are
    never followed out of it; see :func:`workstation.runner.taskcopy.digest`).

    Raises:
        TaskFolderError: the folder holds an entry kws refuses.
    """
    return taskcopy.digest(folder)


class _Spawner:
    """One long-lived thread that starts every sandbox: ``--die-with-parent`` (and the
    parent-death signal) fire when the *thread* that forked a process ends, so no sandbox
    may be forked from a short-lived worker thread."""

    def __init__(self) -> None:
        self._q: queue.Queue[tuple[Any, Future[Any]]] = queue.Queue()
        self._t: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Any) -> Any:
        with self._lock:
            if self._t is None or not self._t.is_alive():
                self._t = threading.Thread(target=self._loop, name="kws-spawner", daemon=True)
                self._t.start()
        fut: Future[Any] = Future()
        self._q.put((fn, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            fn, fut = self._q.get()
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001  (handed to the caller)
                fut.set_exception(e)


_SPAWNER = _Spawner()


def inherited_limit_notes() -> list[str]:
    """Inherited resource limits lower than kws's own, in words (empty when none)."""
    notes = []
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    lim = min(x for x in (soft, hard) if x != resource.RLIM_INFINITY) if \
        any(x != resource.RLIM_INFINITY for x in (soft, hard)) else None
    if lim is not None and lim < CPU_ADDRESS_SPACE_BYTES:
        notes.append(f"an inherited address-space limit (ulimit -v) of {lim // 2**20} MiB is lower than kws's "
                     f"{CPU_ADDRESS_SPACE_BYTES // 2**30} GiB per job: jobs run within it, and a MemoryError may "
                     "come from it rather than from the task")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY and hard < STDIO_LIMIT_BYTES:
        notes.append(f"an inherited file-size limit (ulimit -f) of {hard // 2**20} MiB is lower than kws's "
                     f"{STDIO_LIMIT_BYTES // 2**20} MiB")
    return notes


class Runner:
    """Runs jobs (lists of harness steps) in sandboxed, forked children.

    Thread-safe: checks call :meth:`run` from several threads; at most ``max_parallel``
    jobs run at once (default: the number of CPU cores). Use as a context manager or call
    :meth:`close`.

    Args:
        device: ``"cpu"`` or ``"cuda"`` to force one; ``None``: the ``device`` setting
            (``KWS_DEVICE``; unset: CUDA when present).
        max_parallel: concurrent jobs.
        nice: CPU priority increment of the server and its children.
        sandbox: ``"bwrap"`` or ``"none"``; ``None``: :func:`~workstation.runner.policy.sandbox_mode`
            (the user config, ``KWS_SANDBOX``; default ``"bwrap"``).
    """

    def __init__(self, device: str | None = None, max_parallel: int | None = None, nice: int = 10,
                 sandbox: str | None = None):
        self._device_req = device or settings.current().device
        self.max_parallel = max_parallel or max(1, os.cpu_count() or 1)
        self.sandbox = sandbox or sandbox_mode()
        if self.sandbox not in ("bwrap", "none"):
            raise ValueError(f"sandbox must be 'bwrap' or 'none', not {self.sandbox!r}")
        self._nice = nice
        #: which jobs may run now: up to ``max_parallel`` side by side, a timing job alone.
        self.admission = Admission(self.max_parallel)
        self._lock = threading.Lock()  # protects the server pipe and the waiter table
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._waiters: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._device: DeviceInfo | None = None
        self._root = Path(tempfile.mkdtemp(prefix="kws-run-"))
        self._jobs = self._root / "jobs"
        self._caches = self._root / "caches"
        for d in (self._jobs, self._caches, self._root / "home"):
            d.mkdir()
        self._cgroup: cgroup.MemoryCgroup | None = None
        self._memory_note = ""
        self._closed = False
        #: ``/proc/<fork server>/root``: the server's view of the file system, through which
        #: the runner reads a job folder the server put on a tmpfs ("" without the sandbox).
        self._server_root = ""

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Runner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def device(self) -> DeviceInfo:
        """The device jobs run on (starts the server on first use)."""
        if self._device is None:
            self.start()
        assert self._device is not None
        return self._device

    @property
    def server_pid(self) -> int | None:
        """The host pid of the fork server's outermost process (``bwrap``, or the server
        itself without the sandbox); None before it started or after it ended. For
        diagnostics and tests: every job is its descendant."""
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def _command(self) -> tuple[list[str], dict[str, str], list[str]]:
        """The fork server's command line, environment and isolation notes."""
        pkg = Path(__file__).resolve().parents[1]
        notes: list[str] = []
        server = [sys.executable, "-m", "workstation.harness.forkserver", str(self._nice), self.sandbox]
        if self.sandbox == "none":
            env = child_env(self._root / "home", self._device_req)
            notes.append("sandbox none: task code runs as you, with your files, keys and network in view")
            return server, env, notes
        bw = bwrap.find_bwrap()
        if not bw:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed. " + bwrap.INSTALL_HINT)
        why = bwrap.probe(bw)
        if why:
            raise SandboxUnavailable(f"{why}. " + bwrap.INSTALL_HINT)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpu, uuids, gpu_note = bwrap.gpu_binds(visible)
        if gpu_note:
            notes.append(gpu_note)
        argv = bwrap.sandbox_argv(bw, jobs=self._jobs, caches=self._caches, pkg_dir=pkg, gpu=gpu)
        env = child_env(bwrap.HOME, self._device_req, pythonpath=bwrap.KWS_LIB,
                        cuda_visible=",".join(uuids) if (gpu or visible is not None) else None)
        return [*argv, "--", *server], env, notes

    def start(self) -> DeviceInfo:
        """Start the fork server if it is not running; returns the device it found.

        Raises:
            SandboxUnavailable: bubblewrap is missing or cannot run here.
            RunnerError: the server did not start (its stderr is in the message).
        """
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                assert self._device is not None
                return self._device
            if self._closed:
                raise RunnerError("runner is closed")
            argv, env, notes = self._command()
            limit_notes = inherited_limit_notes()
            if self._cgroup is None:
                cg, why = cgroup.create()
                self._cgroup = cg
                self._memory_note = cg.describe() if cg else f"no memory cap on the GPU: {why}"
            if self._cgroup is not None:
                argv = self._cgroup.wrap(argv)
            errlog = self._root / "forkserver.stderr"
            cwd = self._root / "home"

            def spawn() -> subprocess.Popen[str]:
                return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=errlog.open("wb"), env=env, cwd=cwd, text=True,
                                        start_new_session=True)

            self._proc = _SPAWNER.call(spawn)
            line = self._read_line_with_timeout(READY_TIMEOUT_S)
            if not line:
                self._kill_server()
                tail = read_tail_path(errlog)
                hint = ""
                if any("address-space" in n for n in limit_notes) or "MemoryError" in tail \
                        or "failed to map segment" in tail or "Cannot allocate memory" in tail:
                    hint = ("; " + "; ".join(limit_notes) +
                            ": within it the fork server could not load torch (raise it: `ulimit -v unlimited`)")
                raise RunnerError(f"the kws fork server did not start{hint}: {tail[-2000:]}")
            ready = control.decode_from_server(line)
            if not isinstance(ready, control.Ready):
                self._kill_server()
                raise RunnerError(f"the kws fork server's first message is not 'ready': {line[:300]!r}")
            if self.sandbox == "bwrap" and ready.jobns:
                self._kill_server()
                raise SandboxUnavailable("bubblewrap runs, but a job cannot get namespaces of its own inside it: "
                                         f"{ready.jobns}. " + bwrap.INSTALL_HINT)
            if ready.verifier:
                notes.append(f"kws's out-of-process check of each job is off: {ready.verifier}")
            if self._cgroup is not None or ready.device == "cuda":
                notes.append(self._memory_note)
            self._device = DeviceInfo(
                kind=ready.device,
                label=ready.label,
                interpreter=ready.interpreter,
                versions=ready.versions,
                name=ready.name,
                sandbox=self.sandbox,
                verifier=not ready.verifier,
                notes=tuple(notes + limit_notes),
            )
            self._server_root = _server_root(self._proc.pid) if self.sandbox == "bwrap" else ""
            self._reader = threading.Thread(target=self._read_loop, args=(self._proc,), daemon=True)
            self._reader.start()
            return self._device

    def _read_line_with_timeout(self, timeout: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        result: list[str] = []
        t = threading.Thread(target=lambda: result.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        t.start()
        t.join(timeout)
        return result[0] if result else ""

    def _kill_server(self) -> None:
        if self._proc is not None:
            _killpg(self._proc.pid)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Stop the fork server (it kills every job still running) and remove the run's
        folders (task copies, results, compiler caches)."""
        self._closed = True
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            _killpg(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._cgroup is not None:
            self._cgroup.remove()
        shutil.rmtree(self._root, ignore_errors=True)

    def _read_loop(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = control.decode_from_server(line)
            if msg is None or isinstance(msg, control.Ready):
                continue
            with self._lock:
                w = self._waiters.get(msg.id)
            if w is None:
                continue
            if isinstance(msg, control.Started):
                w["started"].set()
            elif isinstance(msg, control.Verified):
                w["verified"].setdefault(msg.step, []).append(msg)
            elif isinstance(msg, control.CpuUsage):
                w["cpu"] = msg
            elif isinstance(msg, control.Exited):
                w["status"] = msg.status
                w["killed"] = msg.killed
                w["started"].set()
                w["exited"].set()
        # server gone: wake everyone still waiting
        with self._lock:
            for w in self._waiters.values():
                w.setdefault("status", None)
                w["server_gone"] = True
                w["started"].set()
                w["exited"].set()

    def _send(self, req: control.ToServer) -> None:
        with self._lock:
            try:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(control.encode(req).decode())
                self._proc.stdin.flush()
            except (OSError, AssertionError, ValueError) as e:
                raise RunnerError(f"the kws fork server is gone: {e}") from None

    # -- jobs --------------------------------------------------------------------------

    def run(
        self,
        task_dir: Path,
        steps: list[Step],
        *,
        timeout: float,
        exclusive: bool = False,
        entry: dict[str, str] | None = None,
        out_args: list[int] | None = None,
        inout_args: list[int] | None = None,
        step_timeout: float | None = None,
        helper_dirs: list[str] | None = None,
        principal: str = "job",
        cache_key: str = "default",
        cancel: Any = None,
        step_budgets: list[float | None] | None = None,
        import_budget: float | None = None,
    ) -> JobResult:
        """Run ``steps`` in one isolated child on a copy of ``task_dir``
        (``helper_dirs``: the queue's shared helper folders, put on the child's path).

        Args:
            task_dir: the task folder (copied; never modified, never visible to the job).
            steps: the harness steps (:mod:`workstation.protocol.steps`), run in order in
                one process; all of one principal.
            timeout: wall-clock limit for the whole job, seconds.
            step_timeout: CPU budget of any one step, CPU seconds of all the job's processes
                with its imports excluded (None: no budget); a step also stops at its
                wall-clock backstop (:func:`wall_backstop`).
            step_budgets: per step, a CPU budget overriding ``step_timeout`` (None entries:
                ``step_timeout``).
            import_budget: CPU seconds the job's task-file imports may take together (and
                their backstop, :func:`wall_backstop` of it, in wall seconds); None: the
                ``import_budget`` setting.
            exclusive: run with no other job at the same time (timing).
            entry: the task's entry points (role -> ``"file.py:function"``).
            out_args, inout_args: the indices of the inputs the callables write.
            principal: whose code the job runs (``candidate``, ``reference``, ...): the
                name of its compiler cache.
            cache_key: the run and task the caches belong to (one cache per task run).
            cancel: called once the job holds its slot, before it starts; a non-empty
                string cancels it (:class:`JobCancelled`): e.g. its principal hung while
                it waited.

        Raises:
            JobCancelled: ``cancel`` said so.
            StepError: a step does not have its declared form (nothing was started).
            TaskFolderError: the task folder holds something kws will not copy.
            RunnerError: the fork server could not be (re)started or died.
        """
        roles = {"entry": dict(entry or {}), "out_args": list(out_args or []), "inout_args": list(inout_args or []),
                 "helper_dirs": [str(h) for h in helper_dirs or ()]}
        budgets = [b if b is not None else step_timeout for b in (step_budgets or [None] * len(steps))]
        if len(budgets) != len(steps):
            raise ValueError(f"{len(budgets)} step budgets for {len(steps)} steps")
        imp = import_budget if import_budget is not None else settings.current().import_budget
        args = (task_dir, steps, roles, timeout, budgets, imp, principal, cache_key)

        def check_cancel() -> None:
            why = cancel() if cancel is not None else ""
            if why:
                raise JobCancelled(why)

        with self.admission.admitted(exclusive):
            check_cancel()
            return self._run(*args)

    def _paths(self, jid: int, principal: str, cache_key: str) -> tuple[Path, Path, dict[str, str]]:
        """Host job folder, host cache folder, and the paths the server and the job see."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{cache_key}")[:120] or "default"
        role = "".join(c if c.isalnum() else "_" for c in principal)[:40] or "job"
        host_job = self._jobs / str(jid)
        host_cache = self._caches / safe / role
        host_cache.mkdir(parents=True, exist_ok=True)
        if self.sandbox == "bwrap":
            view = {"jobdir": f"{bwrap.JOBS}/{jid}", "cache": f"{bwrap.CACHES}/{safe}/{role}",
                    "job_view": "/kws/job", "cache_view": "/kws/cache", "home": bwrap.HOME}
        else:
            view = {"jobdir": str(host_job), "cache": str(host_cache), "job_view": str(host_job),
                    "cache_view": str(host_cache), "home": str(host_job / "home")}
        return host_job, host_cache, view

    def _run(self, task_dir: Path, steps: list[Step], roles: dict[str, Any], timeout: float,
             budgets: list[float | None], import_budget: float, principal: str, cache_key: str) -> JobResult:
        if self._closed:
            raise RunnerError("runner is closed")
        self.start()
        n = len(steps)
        with self._lock:
            self._next_id += 1
            jid = self._next_id
        work, _, view = self._paths(jid, principal, cache_key)
        work.mkdir()
        out_fd, disk = -1, 0
        w: dict[str, Any] = {}
        try:
            jv = view["job_view"]
            # the queue's helper folders are copied into the job folder like the task (the
            # job sees nothing of the queue itself)
            helpers = [str(h) for h in roles.get("helper_dirs") or ()]
            job = Job(**{**roles, "helper_dirs": [f"{jv}/helpers/{i}" for i in range(len(helpers))]},
                      task_dir=f"{jv}/task", out_dir=f"{jv}/out", device=self.device.kind, steps=steps)
            data = encode_job(job)  # raises StepError before anything runs
            taskcopy.copy(Path(task_dir), work / "task")
            for i, h in enumerate(helpers):
                taskcopy.copy(Path(h), work / "helpers" / str(i))
            (work / "out").mkdir()
            (work / "home").mkdir()
            (work / "job.json").write_bytes(data)
            out_fd = open_dir(work / "out")
            limits = {
                "fsize": STDIO_LIMIT_BYTES,
                "as": CPU_ADDRESS_SPACE_BYTES if self.device.kind == "cpu" else None,
            }
            w = {"started": threading.Event(), "exited": threading.Event(), "verified": {}}
            with self._lock:
                self._waiters[jid] = w
            cfg = settings.current()
            disk = cfg.job_disk_bytes if self._server_root else 0
            req = control.RunJob(id=jid, job=f"{jv}/job.json", jobdir=view["jobdir"], cache=view["cache"], cwd=jv,
                                 home=view["home"], cache_root=view["cache_view"], steps=n, limits=limits,
                                 disk_bytes=disk, tmp_bytes=cfg.job_tmp_bytes, shm_bytes=cfg.job_shm_bytes)
            oom_before = self._cgroup.oom_kills() if self._cgroup is not None else 0
            try:
                self._send(req)
            except RunnerError:
                with self._lock:
                    self._waiters.pop(jid, None)
                raise
            t0 = time.monotonic()
            if disk:  # the job's folder is on its own tmpfs, seen through the server's view
                w["started"].wait(timeout)
                os.close(out_fd)
                out_fd = -1
                out_fd = open_dir(Path(f"{self._server_root}{view['jobdir']}/out"))
            use: dict[str, Any] = {}
            fired = self._watch(jid, w, out_fd, n, t0, timeout, budgets, import_budget, use)
            if fired:
                try:
                    self._send(control.KillJob(id=jid))
                except RunnerError:
                    pass
                if not w["exited"].wait(KILL_GRACE_S):
                    raise RunnerError(f"the kws fork server did not end job {jid} within {KILL_GRACE_S:g} s of "
                                      "being asked to kill it")
            seconds = time.monotonic() - t0
            with self._lock:
                self._waiters.pop(jid, None)
            if w.get("server_gone") and not fired:
                raise RunnerError("the kws fork server died while a job ran: "
                                  + read_tail_path(self._root / "forkserver.stderr")[-1500:])
            oom = (self._cgroup.oom_kills() - oom_before) if self._cgroup is not None else 0
            res = self._collect(out_fd, work / "out", n, w, fired, seconds, timeout, use.get("budget"), oom > 0)
            res.cpu_s, res.step_cpu_s, res.import_cpu_s = use.get("cpu_s"), use.get("step_cpu_s"), use.get("import_cpu_s")
            res.import_budget_s = import_budget
            if fired == "import":
                res.import_file = read_tail(out_fd, "importing.txt", 500)[0].strip()
            return res
        finally:
            if out_fd >= 0:
                os.close(out_fd)
            if disk and w["exited"].is_set():
                try:
                    self._send(control.ReleaseJob(id=jid))
                except RunnerError:
                    pass
            shutil.rmtree(work, ignore_errors=True)

    def _watch(self, jid: int, w: dict[str, Any], out_fd: int, n: int, t0: float, timeout: float,
               budgets: list[float | None], import_budget: float, use: dict[str, Any]) -> str:
        """Wait for the job to exit. Returns the limit that fired, or ``""`` when it exited
        by itself: ``"job"`` (wall time since ``t0`` past ``timeout``), ``"step"`` (the
        running step used more CPU seconds than its budget, its imports excluded),
        ``"import"`` (the job's imports used more than ``import_budget`` CPU seconds, or
        their wall time passed its backstop), ``"wall"`` (the running step's wall time,
        imports excluded, passed :func:`wall_backstop` of its budget). A step runs from
        when its ``.start`` file appears; its CPU counts from the first reading the fork
        server took after that (``cpu`` requests every :data:`CPU_POLL_S`). ``use`` gets
        the last reading: ``cpu_s``, ``step_cpu_s``, ``import_cpu_s``, and the running
        step's ``budget``."""
        current, since = -1, t0
        base: tuple[float, float] | None = None   # (CPU without imports, import wall) at the step's start
        seq, want, last_ask = 0, 0, 0.0
        while not w["exited"].wait(0.05):
            now = time.monotonic()
            if now - t0 > timeout:
                return "job"
            while current + 1 < n and exists(out_fd, f"step-{current + 1}.start"):
                current, since, base, last_ask = current + 1, now, None, 0.0
                use["budget"] = budgets[current]
                want = seq + 1
            if now - last_ask >= CPU_POLL_S:
                seq, last_ask = seq + 1, now
                try:
                    self._send(control.CpuAsk(id=jid, seq=seq))
                except RunnerError:
                    pass
            s: control.CpuUsage | None = w.get("cpu")
            if s is None:
                continue
            cpu, imp_cpu, imp_wall = s.cpu_s, s.import_cpu_s, s.import_wall_s
            use.update(cpu_s=cpu, import_cpu_s=imp_cpu)
            if imp_cpu > import_budget or (s.importing and imp_wall > wall_backstop(import_budget)):
                return "import"
            if current < 0:
                continue
            if base is None:
                if s.seq < want:
                    continue  # a reading from before this step started
                base = (cpu - imp_cpu, imp_wall)
            use["step_cpu_s"] = cpu - imp_cpu - base[0]
            budget = budgets[current]
            if budget is None:
                continue
            if use["step_cpu_s"] > budget:
                return "step"
            if now - since - (imp_wall - base[1]) > wall_backstop(budget):
                return "wall"
        return ""

    def _collect(self, out_fd: int, out: Path, n: int, w: dict[str, Any], fired: str, seconds: float,
                 timeout: float, step_timeout: float | None, oom: bool) -> JobResult:
        steps: list[StepResult | None] = []
        wire_errors: list[str] = []
        forged: dict[int, str] = {}
        forged_changes: dict[int, list[str]] = {}
        budget = Budget(settings.current().result_bytes)
        verify_on = self.device.verifier
        records: dict[int, list[control.Verified]] = w["verified"]
        broken = next((r.custody for k, rs in records.items() if k >= n for r in rs if r.custody), "")
        for i in range(n):
            st, changes = None, []
            rec = (records.get(i) or [None])[0]  # the server counts hand-overs: one per step
            if broken:
                forged[i] = f"its result is refused: {broken}"
            elif rec is None:
                if exists(out_fd, f"step-{i}.json"):
                    forged[i] = ("the job did not hand the step over to kws's fork server (task code closed or took "
                                 "over kws's channel, or ended the process right after the step)")
            elif rec.custody:
                forged[i] = f"its result is refused: {rec.custody}"
            else:
                try:
                    st = read_step(out, i, budget, dir_fd=out_fd, custody=(rec.json_sha256, rec.npz_sha256))
                except WireError as e:
                    wire_errors.append(str(e))
                    forged[i] = f"its result file was refused: {e}"
                changes = sorted(rec.changes or [])
                if st is not None:
                    st.verified = changes if rec.changes is not None and not rec.error else None
                    st.verify_error = rec.error
                    if verify_on:
                        bad = forging_changes(changes)
                        if bad:
                            forged[i] = ("task code patched kws's harness before its result was written (seen by "
                                         f"the fork server from outside the job: {', '.join(bad[:6])})")
                        elif rec.changes is None or rec.error:
                            forged[i] = ("the job could not be checked from outside after the step: "
                                         f"{rec.error or 'no check ran'}")
            if i in forged:
                st = None
                forged_changes[i] = changes
                if changes:
                    forged[i] += f"; all changes seen: {', '.join(changes[:12])}"
            steps.append(st)
        died_in = next((i for i in range(n) if steps[i] is None and i not in forged and exists(out_fd, f"step-{i}.start")),
                       None)
        so, so_n = read_tail(out_fd, "stdout.txt", TAIL_BYTES)
        se, se_n = read_tail(out_fd, "stderr.txt", TAIL_BYTES)
        status = w.get("status")
        limit = fired
        if fired:
            st_, code, sig = "timeout", None, "SIGKILL"
        elif status is None:
            st_, code, sig = "exit", None, None
        elif status < 0:
            sig = signal.Signals(-status).name if -status in signal.valid_signals() else str(-status)
            st_, code = "signal", None
            if sig == "SIGKILL" and oom:
                limit = "memory"
            elif sig == "SIGXFSZ":
                limit = "fsize"
        elif status > 0 or any(s is None for s in steps):
            st_, code, sig = "exit", status, None
        else:
            st_, code, sig = "ok", 0, None
        return JobResult(
            status=st_, exit_code=code, signal_name=sig, steps=steps, died_in_step=died_in,
            seconds=seconds, stdout_tail=so, stderr_tail=se, stdout_bytes=so_n,
            stderr_bytes=se_n, timeout_s=timeout, step_timeout_s=step_timeout, limit=limit,
            memory_note=self._memory_note, wire_errors=wire_errors, forged=forged, forged_changes=forged_changes,
        )


def read_tail_path(path: Path) -> str:
    """The last :data:`TAIL_BYTES` of a file kws wrote itself (the server's log)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _server_root(outer: int) -> str:
    """``/proc/<pid>/root`` of the fork server, the descendant of ``outer`` (bubblewrap)
    whose command line runs :mod:`workstation.harness.forkserver`; "" when none is found
    (the job folders then stay on disk)."""
    todo, seen = [outer], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[1:3] == [b"-m", b"workstation.harness.forkserver"]:
                    return f"/proc/{pid}/root"
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return ""


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
