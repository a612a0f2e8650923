"""Parent side of the isolated runner: the fork server's lifecycle, jobs, limits.

Isolation, per job:

- a fresh temporary copy of the task folder; the child's working directory and ``HOME``
  are temporary folders, so relative writes never reach the queue;
- a scrubbed environment (an allow-list: no tokens, no ``SSH_AUTH_SOCK``, no cloud
  credentials), see :func:`child_env`;
- its own session and process group (``setsid``), killed whole (``SIGKILL``) at the time
  limit and after it exits, so stray grandchildren die too;
- resource limits: no core files, a cap on file size (stdout/stderr floods end with
  ``SIGXFSZ``), a cap on address space on the CPU, a cap on open files;
- a lower CPU priority (``nice``), so the TUI stays responsive;
- results come back as JSON and ``.npz`` files read without unpickling.

The job file is a :class:`workstation.protocol.steps.Job`, encoded and checked against its
type (:func:`~workstation.protocol.steps.encode_job`) before the child is asked to start.

What isolation does not do: the child runs as the same user, so code that writes to an
absolute path it guesses could still reach the queue. kws checks the task folder's
content hash before and after each run (:func:`tree_digest`) and reports a change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from workstation.protocol.lines import json_lines
from workstation.protocol.steps import Job, Step, encode_job
from workstation.protocol.wire import StepResult, WireError, read_step, step_started

#: environment variables a child may inherit (everything else is dropped).
ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_LAUNCH_BLOCKING",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
)
STDIO_LIMIT_BYTES = 256 * 1024 * 1024
CPU_ADDRESS_SPACE_BYTES = 24 * 1024 ** 3
TAIL_BYTES = 8192
READY_TIMEOUT_S = 120.0


class RunnerError(Exception):
    """The runner itself failed (the fork server would not start or died)."""


@dataclass(frozen=True)
class DeviceInfo:
    """Where task code runs. ``kind``: ``"cuda"`` or ``"cpu"``; ``label`` is what reports
    print (``"cpu (triton interpreter)"``, ``"cuda (NVIDIA H200)"``)."""

    kind: str
    label: str
    interpreter: bool
    versions: dict[str, str]
    name: str = ""


@dataclass
class JobResult:
    """What happened to one job.

    ``status``: ``"ok"`` (exited 0), ``"exit"`` (exited non-zero outside a step result),
    ``"signal"`` (killed by a signal it raised or received, e.g. SIGABRT, SIGSEGV,
    SIGXFSZ), ``"timeout"`` (killed by kws at the limit). ``steps[i]`` is ``None`` for a
    step that never finished; ``died_in_step`` is the step running when the process
    died (or ``None``). ``seconds``: wall time of the whole job.
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
    wire_errors: list[str] = field(default_factory=list)

    @property
    def died(self) -> bool:
        return self.status != "ok"

    def describe_death(self) -> str:
        """One sentence for a job that did not end normally."""
        if self.status == "timeout":
            return f"did not finish within the {self.timeout_s:g} s limit and was killed"
        if self.status == "signal":
            extra = ""
            if self.signal_name == "SIGXFSZ":
                extra = f" (wrote more than {STDIO_LIMIT_BYTES // 2**20} MiB to stdout/stderr)"
            return f"the process died from {self.signal_name}{extra}"
        if self.status == "exit":
            return f"the process exited with status {self.exit_code} before reporting a result"
        return "completed"


def kws_cache_dir() -> Path:
    """Per-user cache folder (Triton's kernel cache lives under it)."""
    return Path(os.environ.get("KWS_CACHE_DIR") or platformdirs.user_cache_dir("kws"))


def child_env(home: Path, device: str | None) -> dict[str, str]:
    """The scrubbed environment of the fork server and its children.

    Only :data:`ENV_ALLOW` passes through. ``HOME`` is a temporary folder, Triton's cache
    a kws cache folder, one intra-op thread per child (jobs run in parallel),
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` so that asking whether CUDA exists does not
    initialise CUDA in the server (children are forked from it).
    """
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    pkg_root = str(Path(__file__).resolve().parents[2])
    env.update(
        HOME=str(home),
        PYTHONPATH=pkg_root,
        PYTHONDONTWRITEBYTECODE="1",
        PYTORCH_NVML_BASED_CUDA_CHECK="1",
        TRITON_CACHE_DIR=str(kws_cache_dir() / "triton"),
        OMP_NUM_THREADS=os.environ.get("KWS_CHILD_THREADS", "1"),
        MKL_NUM_THREADS=os.environ.get("KWS_CHILD_THREADS", "1"),
        TRITON_DEFAULT_FP_FUSION=os.environ.get("TRITON_DEFAULT_FP_FUSION", "1"),
    )
    if device:
        env["KWS_DEVICE"] = device
    return env


def tree_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes under ``folder``."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _tail(path: Path) -> tuple[str, int]:
    if not path.exists():
        return "", 0
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(0, size - TAIL_BYTES))
        return f.read().decode("utf-8", "replace"), size


class Runner:
    """Runs jobs (lists of harness steps) in forked, isolated children.

    Thread-safe: checks call :meth:`run` from several threads; at most ``max_parallel``
    jobs run at once (default: the number of CPU cores). Use as a context manager or call
    :meth:`close`.

    Args:
        device: ``"cpu"`` or ``"cuda"`` to force one; ``None`` picks CUDA when present.
        max_parallel: concurrent jobs.
        nice: CPU priority increment of the server and its children.
    """

    def __init__(self, device: str | None = None, max_parallel: int | None = None, nice: int = 10):
        self._device_req = device or os.environ.get("KWS_DEVICE") or None
        self.max_parallel = max_parallel or max(1, os.cpu_count() or 1)
        self._nice = nice
        self._slots = threading.BoundedSemaphore(self.max_parallel)
        self._exclusive = threading.Lock()  # held by timing jobs: nothing else runs
        self._active = 0
        self._active_cv = threading.Condition()
        self._lock = threading.Lock()  # protects the server pipe and the waiter table
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._waiters: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._device: DeviceInfo | None = None
        self._home = Path(tempfile.mkdtemp(prefix="kws-home-"))
        self._closed = False

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

    def start(self) -> DeviceInfo:
        """Start the fork server if it is not running; returns the device it found.

        Raises:
            RunnerError: the server did not start (its stderr is in the message).
        """
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                assert self._device is not None
                return self._device
            (kws_cache_dir() / "triton").mkdir(parents=True, exist_ok=True)
            errlog = self._home / "forkserver.stderr"
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "workstation.harness.forkserver", str(self._nice)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errlog.open("wb"),
                env=child_env(self._home, self._device_req),
                cwd=self._home,
                text=True,
                start_new_session=True,
            )
            line = self._read_line_with_timeout(READY_TIMEOUT_S)
            if not line:
                self._proc.kill()
                raise RunnerError(f"the kws fork server did not start: {_tail(errlog)[0][-2000:]}")
            ready = json.loads(line)
            self._device = DeviceInfo(
                kind=ready["device"],
                label=ready["label"],
                interpreter=ready["interpreter"],
                versions=ready["versions"],
                name=ready.get("name", ""),
            )
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

    def close(self) -> None:
        """Stop the fork server and kill any job still running."""
        self._closed = True
        with self._lock:
            proc, self._proc = self._proc, None
            waiters = list(self._waiters.values())
        for w in waiters:
            if w.get("pid"):
                _killpg(w["pid"])
        if proc is not None:
            try:
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                _killpg(proc.pid)
        shutil.rmtree(self._home, ignore_errors=True)

    def _read_loop(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for msg in json_lines(proc.stdout):
            with self._lock:
                w = self._waiters.get(msg.get("id"))
            if w is None:
                continue
            if msg.get("op") == "started":
                w["pid"] = msg["pid"]
                w["started"].set()
            elif msg.get("op") == "exited":
                w["status"] = msg["status"]
                w["started"].set()
                w["exited"].set()
        # server gone: wake everyone still waiting
        with self._lock:
            for w in self._waiters.values():
                w.setdefault("status", None)
                w["started"].set()
                w["exited"].set()

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
    ) -> JobResult:
        """Run ``steps`` in one isolated child on a copy of ``task_dir``
        (``helper_dirs``: the queue's shared helper folders, put on the child's path).

        Args:
            task_dir: the task folder (copied; never modified).
            steps: the harness steps (:mod:`workstation.protocol.steps`), run in order in
                one process.
            timeout: wall-clock limit for the whole job, seconds.
            step_timeout: wall-clock limit for any one step, seconds (None: no limit).
            exclusive: run with no other job at the same time (timing).
            entry: the task's entry points (role -> ``"file.py:function"``).
            out_args, inout_args: the indices of the inputs the callables write.

        Raises:
            StepError: a step does not have its declared form (nothing was started).
            RunnerError: the fork server could not be (re)started.
        """
        roles = {"entry": dict(entry or {}), "out_args": list(out_args or []), "inout_args": list(inout_args or []),
                 "helper_dirs": [str(h) for h in helper_dirs or ()]}
        if exclusive:
            with self._exclusive:
                with self._active_cv:
                    self._active_cv.wait_for(lambda: self._active == 0)
                return self._run(task_dir, steps, roles, timeout, step_timeout)
        with self._slots:
            with self._exclusive:  # wait while a timing job runs
                pass
            with self._active_cv:
                self._active += 1
            try:
                return self._run(task_dir, steps, roles, timeout, step_timeout)
            finally:
                with self._active_cv:
                    self._active -= 1
                    self._active_cv.notify_all()

    def _run(self, task_dir: Path, steps: list[Step], roles: dict[str, Any], timeout: float,
             step_timeout: float | None) -> JobResult:
        if self._closed:
            raise RunnerError("runner is closed")
        self.start()
        n = len(steps)
        work = Path(tempfile.mkdtemp(prefix="kws-job-"))
        try:
            copy, out = work / "task", work / "out"
            job = Job(**roles, task_dir=str(copy), out_dir=str(out), device=self.device.kind, steps=steps)
            data = encode_job(job)  # raises StepError before anything runs
            shutil.copytree(task_dir, copy, ignore=shutil.ignore_patterns("__pycache__", ".git"))
            out.mkdir()
            (work / "job.json").write_bytes(data)
            limits = {
                "fsize": STDIO_LIMIT_BYTES,
                "as": CPU_ADDRESS_SPACE_BYTES if self.device.kind == "cpu" else None,
            }
            with self._lock:
                self._next_id += 1
                jid = self._next_id
                w: dict[str, Any] = {"started": threading.Event(), "exited": threading.Event()}
                self._waiters[jid] = w
                req = {"op": "run", "id": jid, "job": str(work / "job.json"), "cwd": str(work), "limits": limits}
                try:
                    assert self._proc is not None and self._proc.stdin is not None
                    self._proc.stdin.write(json.dumps(req) + "\n")
                    self._proc.stdin.flush()
                except (OSError, AssertionError) as e:
                    self._waiters.pop(jid, None)
                    raise RunnerError(f"the kws fork server is gone: {e}") from None
            t0 = time.monotonic()
            timed_out = self._watch(w, out, n, t0, timeout, step_timeout)
            if timed_out:
                w["started"].wait(5)
                if w.get("pid"):
                    _killpg(w["pid"])
                w["exited"].wait(10)
            seconds = time.monotonic() - t0
            if w.get("pid"):
                _killpg(w["pid"])  # stray grandchildren
            with self._lock:
                self._waiters.pop(jid, None)
            return self._collect(out, n, w.get("status"), timed_out, seconds, timeout)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    @staticmethod
    def _watch(w: dict[str, Any], out: Path, n: int, t0: float, timeout: float,
               step_timeout: float | None) -> bool:
        """Wait for the job to exit; True when it ran past ``timeout`` (whole job) or one
        step ran past ``step_timeout`` (measured from when its ``.start`` file appeared)."""
        current, since = -1, t0
        while not w["exited"].wait(0.05):
            now = time.monotonic()
            if now - t0 > timeout:
                return True
            if step_timeout is None:
                continue
            while current + 1 < n and step_started(out, current + 1):
                current, since = current + 1, now
            if current >= 0 and now - since > step_timeout:
                return True
        return False

    def _collect(self, out: Path, n: int, status: int | None, timed_out: bool,
                 seconds: float, timeout: float) -> JobResult:
        steps: list[StepResult | None] = []
        wire_errors = []
        for i in range(n):
            try:
                steps.append(read_step(out, i))
            except WireError as e:
                steps.append(None)
                wire_errors.append(str(e))
        died_in = next((i for i in range(n) if steps[i] is None and step_started(out, i)), None)
        so, so_n = _tail(out / "stdout.txt")
        se, se_n = _tail(out / "stderr.txt")
        if timed_out:
            st, code, sig = "timeout", None, "SIGKILL"
        elif status is None:
            st, code, sig = "exit", None, None
        elif status < 0:
            st, code, sig = "signal", None, signal.Signals(-status).name if -status in signal.valid_signals() else str(-status)
        elif status > 0:
            st, code, sig = "exit", status, None
        else:
            st, code, sig = "ok", 0, None
        return JobResult(
            status=st, exit_code=code, signal_name=sig, steps=steps, died_in_step=died_in,
            seconds=seconds, stdout_tail=so, stderr_tail=se, stdout_bytes=so_n,
            stderr_bytes=se_n, timeout_s=timeout, wire_errors=wire_errors,
        )


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
