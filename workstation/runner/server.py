"""The fork server's process, from the parent's side: its command line (inside bubblewrap,
in a memory cgroup where the machine allows one) and scrubbed environment, starting it and
reading its ``Ready``, one reader thread that routes its messages to the jobs waiting on
them, sending it requests, and stopping it.

The server itself is :mod:`workstation.harness.forkserver` (started by module name: the
runner never imports the harness); the messages are :mod:`workstation.protocol.control`.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from workstation import settings
from workstation.protocol import childenv, control
from workstation.runner import bwrap, cgroup
from workstation.runner.limits import inherited_limit_notes
from workstation.runner.results import TAIL_BYTES

#: environment variables a child may inherit (everything else is dropped).
ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_LAUNCH_BLOCKING",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
)
#: seconds the fork server has to say ``ready`` (it imports torch and triton first).
READY_TIMEOUT_S = 120.0

T = TypeVar("T")


class RunnerError(Exception):
    """The runner itself failed (the fork server would not start or died): kws's fault or
    its environment's, never a verdict on the task."""


class SandboxUnavailable(RunnerError):
    """bubblewrap is missing or cannot create its namespaces here (the message says how to
    install it and how to opt out)."""


@dataclass(frozen=True)
class DeviceInfo:
    """Where task code runs. ``kind``: ``"cuda"`` or ``"cpu"``; ``label`` is what reports
    print (``"cpu (triton interpreter)"``, ``"cuda (NVIDIA H200)"``); ``sandbox``:
    ``"bwrap"`` or ``"none"``; ``notes``: what the report should say about the isolation
    (memory cap, an inherited limit, the out-of-process check being off)."""

    kind: Literal["cpu", "cuda"]
    label: str
    interpreter: bool
    versions: dict[str, str]
    name: str = ""
    sandbox: str = "none"
    verifier: bool = False
    notes: tuple[str, ...] = ()


@dataclass
class Waiter:
    """What the reader thread has heard from the fork server about one job: ``started``
    (set on ``Started``, and on the end), ``exited`` (set on ``Exited`` or when the server
    is gone), the ``Verified`` hand-over records by step, the latest ``CpuUsage``, the exit
    ``status`` (the exit code or minus the signal; None when none came), whether the server
    ``killed`` it (on request, or ``ended``: why it ended a job that broke its channel's
    protocol), and ``server_gone``."""

    started: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    verified: dict[int, list[control.Verified]] = field(default_factory=dict)
    cpu: control.CpuUsage | None = None
    status: int | None = None
    killed: bool = False
    ended: str = ""
    server_gone: bool = False

    def hear(self, msg: control.FromServer) -> None:
        """Take one message of the server about this job."""
        if isinstance(msg, control.Started):
            self.started.set()
        elif isinstance(msg, control.Verified):
            self.verified.setdefault(msg.step, []).append(msg)
        elif isinstance(msg, control.CpuUsage):
            self.cpu = msg
        elif isinstance(msg, control.Exited):
            self.status = msg.status
            self.killed = msg.killed
            self.ended = msg.ended
            self.started.set()
            self.exited.set()

    def gone(self) -> None:
        """The server ended: nothing more will come."""
        self.server_gone = True
        self.started.set()
        self.exited.set()


def child_env(home: Path | str, device: str | None, *, pythonpath: str | None = None,
              cuda_visible: str | None = None) -> dict[str, str]:
    """The scrubbed environment of the fork server and its children.

    Only :data:`ENV_ALLOW` passes through. ``HOME`` is ``home`` (private), ``TMPDIR``
    ``/tmp``, one intra-op thread per child (jobs run in parallel),
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` so that asking whether CUDA exists does not
    initialise CUDA in the server (children are forked from it); the compiler caches are
    set per job (:meth:`workstation.runner.sandbox.Runner.run`). ``cuda_visible``: the
    ``CUDA_VISIBLE_DEVICES`` of the sandbox (the bound GPUs' UUIDs). Settings the child
    needs are resolved here and passed through :mod:`workstation.protocol.childenv`:
    ``device`` (when forced) and the ``input_budget``, ``test_stretch`` and
    ``cuda_emulation`` settings; ``child_threads`` becomes ``OMP_NUM_THREADS`` /
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


class _Spawner:
    """One long-lived thread that starts every sandbox: ``--die-with-parent`` (and the
    parent-death signal) fire when the *thread* that forked a process ends, so no sandbox
    may be forked from a short-lived worker thread."""

    def __init__(self) -> None:
        self._q: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._t: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on the spawner thread; its result, or its exception raised here."""
        with self._lock:
            if self._t is None or not self._t.is_alive():
                self._t = threading.Thread(target=self._loop, name="kws-spawner", daemon=True)
                self._t.start()
        fut: Future[T] = Future()
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


def read_tail_path(path: Path) -> str:
    """The last :data:`~workstation.runner.results.TAIL_BYTES` of a file kws wrote itself
    (the server's log); "" when it cannot be read."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def server_view(outer: int) -> str:
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


def killpg(pid: int) -> None:
    """``SIGKILL`` to process group ``pid`` (nothing when it is gone or not ours)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_quietly(proc: subprocess.Popen[str], timeout: float = 5.0) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


class ForkServer:
    """One fork server process of a runner (module doc), started on first use, restarted
    by :meth:`start` after it died. Thread-safe.

    Args:
        root: the run's folder: ``jobs/`` (job folders), ``caches/`` (compiler caches),
            ``home/`` (the server's working directory, and ``HOME`` without the sandbox),
            ``forkserver.stderr`` (the server's log).
        sandbox: ``"bwrap"`` or ``"none"``.
        device: ``"cpu"`` or ``"cuda"`` to force one, else None.
        nice: CPU priority increment of the server and its children.
    """

    def __init__(self, root: Path, *, sandbox: str, device: str | None, nice: int) -> None:
        self.root = root
        self.sandbox = sandbox
        self._device_req = device
        self._nice = nice
        self._lock = threading.Lock()  # protects the server pipe and the waiter table
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._waiters: dict[int, Waiter] = {}
        self._next_id = 0
        self._device: DeviceInfo | None = None
        self._cgroup: cgroup.MemoryCgroup | None = None
        #: what the report says about the memory cap ("" before the first start).
        self.memory_note = ""
        self.closed = False
        #: ``/proc/<fork server>/root``: the server's view of the file system, through which
        #: the runner reads a job folder the server put on a tmpfs ("" without the sandbox).
        self.view_root = ""

    @property
    def device(self) -> DeviceInfo:
        """The device jobs run on (starts the server on first use)."""
        return self._device if self._device is not None else self.start()

    @property
    def pid(self) -> int | None:
        """The host pid of the server's outermost process (``bwrap``, or the server itself
        without the sandbox); None before it started or after it ended."""
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    @property
    def log(self) -> Path:
        """The server's stderr."""
        return self.root / "forkserver.stderr"

    def command(self) -> tuple[list[str], dict[str, str], list[str]]:
        """The fork server's command line, environment and isolation notes.

        Raises:
            SandboxUnavailable: bubblewrap is missing or cannot run here.
        """
        pkg = Path(__file__).resolve().parents[1]
        notes: list[str] = []
        server = [sys.executable, "-m", "workstation.harness.forkserver", str(self._nice), self.sandbox]
        if self.sandbox == "none":
            env = child_env(self.root / "home", self._device_req)
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
        argv = bwrap.sandbox_argv(bw, jobs=self.root / "jobs", caches=self.root / "caches", pkg_dir=pkg, gpu=gpu)
        env = child_env(bwrap.HOME, self._device_req, pythonpath=bwrap.KWS_LIB,
                        cuda_visible=",".join(uuids) if (gpu or visible is not None) else None)
        return [*argv, "--", *server], env, notes

    def start(self) -> DeviceInfo:
        """Start the server if it is not running; returns the device it found.

        Raises:
            SandboxUnavailable: bubblewrap is missing or cannot run here.
            RunnerError: the server did not start (its stderr is in the message).
        """
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                assert self._device is not None
                return self._device
            if self.closed:
                raise RunnerError("runner is closed")
            argv, env, notes = self.command()
            limit_notes = inherited_limit_notes()
            if self._cgroup is None:
                cg, why = cgroup.create()
                self._cgroup = cg
                self.memory_note = cg.describe() if cg else f"no memory cap on the GPU: {why}"
            if self._cgroup is not None:
                argv = self._cgroup.wrap(argv)
            proc = self._proc = self._spawn(argv, env)
            ready = self._ready(proc, limit_notes)
            if ready.verifier:
                notes.append(f"kws's out-of-process check of each job is off: {ready.verifier}")
            if self._cgroup is not None or ready.device == "cuda":
                notes.append(self.memory_note)
            kind: Literal["cpu", "cuda"] = "cuda" if ready.device == "cuda" else "cpu"
            self._device = DeviceInfo(kind=kind, label=ready.label, interpreter=ready.interpreter,
                                      versions=ready.versions, name=ready.name, sandbox=self.sandbox,
                                      verifier=not ready.verifier, notes=tuple(notes + limit_notes))
            self.view_root = server_view(proc.pid) if self.sandbox == "bwrap" else ""
            self._reader = threading.Thread(target=self._read_loop, args=(proc,), daemon=True)
            self._reader.start()
            return self._device

    def _spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        log, cwd = self.log, self.root / "home"

        def spawn() -> subprocess.Popen[str]:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("wb"),
                                    env=env, cwd=cwd, text=True, start_new_session=True)

        return _SPAWNER.call(spawn)

    def _ready(self, proc: subprocess.Popen[str], limit_notes: list[str]) -> control.Ready:
        """The server's first message, a ``Ready`` whose job namespaces work.

        Raises:
            RunnerError: no ``Ready`` came within :data:`READY_TIMEOUT_S`, or it names
                neither ``cpu`` nor ``cuda`` (the server is killed).
            SandboxUnavailable: jobs cannot get namespaces of their own in the sandbox.
        """
        line = _read_line_with_timeout(proc, READY_TIMEOUT_S)
        if not line:
            self._kill()
            tail = read_tail_path(self.log)
            hint = ""
            if any("address-space" in n for n in limit_notes) or "MemoryError" in tail \
                    or "failed to map segment" in tail or "Cannot allocate memory" in tail:
                hint = ("; " + "; ".join(limit_notes) +
                        ": within it the fork server could not load torch (raise it: `ulimit -v unlimited`)")
            raise RunnerError(f"the kws fork server did not start{hint}: {tail[-2000:]}")
        ready = control.decode_from_server(line)
        if not isinstance(ready, control.Ready):
            self._kill()
            raise RunnerError(f"the kws fork server's first message is not 'ready': {line[:300]!r}")
        if ready.device not in ("cpu", "cuda"):
            self._kill()
            raise RunnerError(f"the kws fork server names a device kws does not know: {ready.device!r}")
        if self.sandbox == "bwrap" and ready.jobns:
            self._kill()
            raise SandboxUnavailable("bubblewrap runs, but a job cannot get namespaces of its own inside it: "
                                     f"{ready.jobns}. " + bwrap.INSTALL_HINT)
        return ready

    def _kill(self) -> None:
        if self._proc is not None:
            killpg(self._proc.pid)
            _wait_quietly(self._proc)

    def close(self) -> None:
        """Stop the server (it kills every job still running) and remove its memory cgroup."""
        self.closed = True
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            killpg(proc.pid)
            _wait_quietly(proc)
        if self._cgroup is not None:
            self._cgroup.remove()

    def _read_loop(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = control.decode_from_server(line)
            if msg is None or isinstance(msg, control.Ready):
                continue
            with self._lock:
                w = self._waiters.get(msg.id)
            if w is not None:
                w.hear(msg)
        with self._lock:  # server gone: wake everyone still waiting
            for w in self._waiters.values():
                w.gone()

    def send(self, req: control.ToServer) -> None:
        """Write one request to the server.

        Raises:
            RunnerError: the server is gone.
        """
        with self._lock:
            try:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(control.encode(req).decode())
                self._proc.stdin.flush()
            except (OSError, AssertionError, ValueError) as e:
                raise RunnerError(f"the kws fork server is gone: {e}") from None

    def try_send(self, req: control.ToServer) -> None:
        """:meth:`send`, where a server that is gone is no error (the job's end says so)."""
        try:
            self.send(req)
        except RunnerError:
            pass

    def next_id(self) -> int:
        """A new job id (1, 2, ...)."""
        with self._lock:
            self._next_id += 1
            return self._next_id

    def register(self, jid: int) -> Waiter:
        """Route the server's messages about job ``jid`` to a new :class:`Waiter`."""
        w = Waiter()
        with self._lock:
            self._waiters[jid] = w
        return w

    def forget(self, jid: int) -> None:
        """Stop routing messages about job ``jid``."""
        with self._lock:
            self._waiters.pop(jid, None)

    def oom_kills(self) -> int:
        """OOM kills its memory cgroup has counted so far (0 without one)."""
        return self._cgroup.oom_kills() if self._cgroup is not None else 0


def _read_line_with_timeout(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``proc`` writes on stdout, "" when none came within ``timeout`` s."""
    out = proc.stdout
    assert out is not None
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(out.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return result[0] if result else ""
