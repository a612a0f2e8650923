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
  (``/proc/<server>/root``), or its principal's compiler cache; its ``/dev`` is its own
  (the few nodes task code needs), the sandbox's root read-only, the kernel's keyrings
  refused;
- jobs of one *principal* only: the runner runs steps of one role (``candidate``,
  ``reference``, ...) per job (:func:`workstation.protocol.steps.principal`), so a
  candidate job and a reference job never share a process, a file or a namespace;
- compiler caches (Triton, inductor, ``TORCH_EXTENSIONS_DIR``) are one per task run and
  principal (``cache_key``), under the run's folder, deleted with it;
- a scrubbed environment (an allow-list: no tokens, no ``SSH_AUTH_SOCK``, no cloud
  credentials), see :func:`workstation.runner.server.child_env`;
- resource limits (:mod:`workstation.runner.limits`): no core files, a cap on file size
  (stdout/stderr floods end with ``SIGXFSZ``), a cap on address space on the CPU, a cap on
  open files, each the smaller of kws's value and the inherited one; a lower CPU priority
  (``nice``);
- a job is killed whole at its limits; when kws exits (even by ``SIGKILL``) the sandbox
  and everything in it ends;
- step budgets are CPU seconds (user + system) of every process of the job, as the fork
  server reads them from ``/proc`` (:func:`workstation.harness.procs.read_job`), so a
  loaded machine slows a job without changing what stops it; the imports of task files are
  charged to the job's import budget instead (the ``import_budget`` setting); a step's
  *wait budget* bounds its blocked seconds (no thread of the job running or waiting to run:
  a sleep, a blocked read, a deadlock), which load does not inflate either (limit
  ``"blocked"``); a wall-clock backstop (:func:`~workstation.runner.limits.wall_backstop`:
  10 x the larger budget + 30 s) guards against kws's own faults, and what it alone stops
  has limit ``"wall"`` (:class:`~workstation.runner.limits.BudgetWatch`); a caller's
  ``abandon`` hook ends a running job it no longer needs (its principal hung meanwhile);
- the task folder is copied without following it anywhere (:mod:`workstation.runner.taskcopy`);
  results are read as hostile input, bounded per job (:mod:`workstation.protocol.wire`);
- custody: after every step the fork server stops the whole job, checks it from outside
  (:mod:`workstation.harness.watch`) and records the sha256 of the step's result files
  (:mod:`workstation.protocol.control`); the runner reads each file once and uses it only
  with those bytes (:mod:`workstation.runner.results`). A result written after kws's
  harness was patched, without that hand-over, or rewritten after it, is refused
  (``forged``), never judged.

``sandbox="none"`` (``--no-sandbox``, or ``sandbox = "none"`` in the user config; see
:mod:`workstation.runner.policy`) keeps the copies, the environment, the limits and the
checks from outside, but task code then runs as the reviewer with their file system in
view; every report says ``"sandbox": "none"``.

The job file is a :class:`workstation.protocol.steps.Job`, encoded and checked against its
type (:func:`~workstation.protocol.steps.encode_job`) before the child is asked to start.

This module is the :class:`Runner`: job folders and caches, admission
(:mod:`workstation.runner.admission`), one job's run. The fork server's process is
:mod:`workstation.runner.server`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workstation import settings
from workstation.protocol import control
from workstation.protocol.steps import Job, Step, encode_job
from workstation.protocol.wire import exists, open_dir, read_tail
from workstation.runner import bwrap, limits, taskcopy
from workstation.runner.admission import Admission
from workstation.runner.limits import BudgetWatch
from workstation.runner.policy import sandbox_mode
from workstation.runner.results import JobEnd, JobResult, collect
from workstation.runner.server import DeviceInfo, ForkServer, RunnerError, Waiter, read_tail_path

#: seconds a killed job has to be reported gone before the runner gives up on the server.
KILL_GRACE_S = 10.0


class JobCancelled(Exception):  # a control-flow signal
    """A job's ``cancel`` hook said not to start it (after it waited for a slot)."""


def kws_cache_dir() -> Path:
    """Per-user cache folder of kws's own data (never written by task code): the
    ``cache_dir`` setting (``KWS_CACHE_DIR``, else ``platformdirs.user_cache_dir("kws")``)."""
    return settings.current().cache_dir


def tree_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes under ``folder`` (symlinks are
    never followed out of it; see :func:`workstation.runner.taskcopy.digest`).

    Raises:
        TaskFolderError: the folder holds an entry kws refuses.
    """
    return taskcopy.digest(folder)


@dataclass(frozen=True)
class JobPaths:
    """Where one job's files are: ``host`` (its folder on the host), and as the fork server
    sees them: ``jobdir`` (that folder), ``cache`` (its principal's compiler cache); as the
    job sees them: ``job_view``, ``cache_view``, ``home``."""

    host: Path
    jobdir: str
    cache: str
    job_view: str
    cache_view: str
    home: str


class Runner:
    """Runs jobs (lists of harness steps) in sandboxed, forked children.

    Thread-safe: checks call :meth:`run` from several threads; at most ``max_parallel``
    jobs run at once, and a job run with ``exclusive`` runs alone
    (:class:`~workstation.runner.admission.Admission`). Use as a context manager or call
    :meth:`close`.

    Args:
        device: ``"cpu"`` or ``"cuda"`` to force one; ``None``: the ``device`` setting
            (``KWS_DEVICE``; unset: CUDA when present).
        max_parallel: concurrent jobs.
        nice: CPU priority increment of the server and its children.
        sandbox: ``"bwrap"`` or ``"none"``; ``None``: :func:`~workstation.runner.policy.sandbox_mode`
            (the user config, ``KWS_SANDBOX``; default ``"bwrap"``).

    Raises:
        ValueError: ``sandbox`` is neither.
    """

    def __init__(self, device: str | None = None, max_parallel: int | None = None, nice: int = 10,
                 sandbox: str | None = None):
        self._device_req = device or settings.current().device
        self.max_parallel = max_parallel or max(1, os.cpu_count() or 1)
        self.sandbox = sandbox or sandbox_mode()
        if self.sandbox not in ("bwrap", "none"):
            raise ValueError(f"sandbox must be 'bwrap' or 'none', not {self.sandbox!r}")
        #: which jobs may run now: up to ``max_parallel`` side by side, a timing job alone.
        self.admission = Admission(self.max_parallel)
        self._root = Path(tempfile.mkdtemp(prefix="kws-run-"))
        self._jobs = self._root / "jobs"
        self._caches = self._root / "caches"
        for d in (self._jobs, self._caches, self._root / "home"):
            d.mkdir()
        #: the fork server's process (started on first use).
        self.server = ForkServer(self._root, sandbox=self.sandbox, device=self._device_req, nice=nice)

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Runner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def device(self) -> DeviceInfo:
        """The device jobs run on (starts the server on first use)."""
        return self.server.device

    @property
    def server_pid(self) -> int | None:
        """The host pid of the fork server's outermost process (``bwrap``, or the server
        itself without the sandbox); None before it started or after it ended. For
        diagnostics and tests: every job is its descendant."""
        return self.server.pid

    def start(self) -> DeviceInfo:
        """Start the fork server if it is not running; returns the device it found.

        Raises:
            SandboxUnavailable: bubblewrap is missing or cannot run here.
            RunnerError: the server did not start (its stderr is in the message).
        """
        return self.server.start()

    def close(self) -> None:
        """Stop the fork server (it kills every job still running) and remove the run's
        folders (task copies, results, compiler caches)."""
        self.server.close()
        shutil.rmtree(self._root, ignore_errors=True)

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
        cancel: Callable[[], str] | None = None,
        step_budgets: list[float | None] | None = None,
        import_budget: float | None = None,
        target: str | None = None,
        wait_budgets: list[float | None] | None = None,
        abandon: Callable[[int], str] | None = None,
    ) -> JobResult:
        """Run ``steps`` in one isolated child on a copy of ``task_dir``
        (``helper_dirs``: the queue's shared helper folders, put on the child's path).

        Args:
            task_dir: the task folder (copied; never modified, never visible to the job).
            steps: the harness steps (:mod:`workstation.protocol.steps`), run in order in
                one process; all of one principal.
            timeout: wall-clock limit for the whole job, seconds, counted without the time
                the job waited on a run queue (a busy machine; :class:`BudgetWatch`).
            step_timeout: CPU budget of any one step, CPU seconds of all the job's processes
                with its imports excluded (None: no budget); a step also stops at its
                wall-clock backstop (:func:`~workstation.runner.limits.wall_backstop`).
            step_budgets: per step, a CPU budget overriding ``step_timeout`` (None entries:
                ``step_timeout``).
            wait_budgets: per step, its wait budget in blocked seconds (wall time in which
                no thread of the job ran or waited to run; None entries, or None: the
                step's CPU budget).
            import_budget: CPU seconds the job's task-file imports may take together (and
                their backstop, :func:`~workstation.runner.limits.wall_backstop` of it, in
                wall seconds); None: the ``import_budget`` setting.
            exclusive: run with no other job at the same time (timing).
            entry: the task's entry points (role -> ``"file.py:function"``).
            out_args, inout_args: the indices of the inputs the callables write.
            principal: whose code the job runs (``candidate``, ``reference``, ...): the
                name of its compiler cache.
            cache_key: the run and task the caches belong to (one cache per task run).
            cancel: called once the job is admitted (counted as running), before it
                starts; a non-empty string cancels it (:class:`JobCancelled`): e.g. its
                principal hung while it waited.
            abandon: called while the job runs (every
                :data:`~workstation.runner.limits.CPU_POLL_S`) with the index of the running
                step (-1 before the first); a non-empty string kills the job, which ends
                with status ``"cancelled"`` and that string as ``cancel_reason``.
            target: the task's declared ``[target] device`` (``Task.extensions.target``;
                None: none declared), what the job child's device stand-in answers as.

        Raises:
            JobCancelled: ``cancel`` said so.
            StepError: a step does not have its declared form (nothing was started).
            TaskFolderError: the task folder holds something kws will not copy.
            RunnerError: the fork server could not be (re)started or died.
        """
        roles = {"entry": dict(entry or {}), "out_args": list(out_args or []), "inout_args": list(inout_args or []),
                 "helper_dirs": [str(h) for h in helper_dirs or ()], "target": target}
        budgets = [b if b is not None else step_timeout for b in (step_budgets or [None] * len(steps))]
        waits = [w if w is not None else b for w, b in zip(wait_budgets or [None] * len(steps), budgets, strict=False)]
        if len(budgets) != len(steps) or len(waits) != len(steps):
            raise ValueError(f"{len(budgets)} step budgets and {len(waits)} wait budgets for {len(steps)} steps")
        imp = import_budget if import_budget is not None else settings.current().import_budget
        asked = time.monotonic()
        with self.admission.admitted(exclusive):
            queued = time.monotonic() - asked
            why = cancel() if cancel is not None else ""
            if why:
                raise JobCancelled(why)
            watch = BudgetWatch(budgets, imp, timeout, time.monotonic(), waits)
            res = self._run(task_dir, steps, roles, watch, principal, cache_key, abandon)
            res.admission_wait_s = queued
            return res

    def _paths(self, jid: int, principal: str, cache_key: str) -> JobPaths:
        """The job's folder and cache, and the paths the server and the job see (the host
        cache folder is made here)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{cache_key}")[:120] or "default"
        role = "".join(c if c.isalnum() else "_" for c in principal)[:40] or "job"
        host_job = self._jobs / str(jid)
        host_cache = self._caches / safe / role
        host_cache.mkdir(parents=True, exist_ok=True)
        if self.sandbox == "bwrap":
            return JobPaths(host_job, jobdir=f"{bwrap.JOBS}/{jid}", cache=f"{bwrap.CACHES}/{safe}/{role}",
                            job_view="/kws/job", cache_view="/kws/cache", home=bwrap.HOME)
        return JobPaths(host_job, jobdir=str(host_job), cache=str(host_cache), job_view=str(host_job),
                        cache_view=str(host_cache), home=str(host_job / "home"))

    def _prepare(self, paths: JobPaths, task_dir: Path, steps: list[Step], roles: dict[str, Any]) -> None:
        """Fill the job's folder: the job file, a copy of the task and of the queue's helper
        folders (the job sees nothing of the queue itself), empty ``out/`` and ``home/``.

        Raises:
            StepError: a step does not have its declared form (before anything is copied).
            TaskFolderError: a folder holds something kws will not copy.
        """
        work, jv = paths.host, paths.job_view
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

    def _request(self, jid: int, paths: JobPaths, n: int, disk: int) -> control.RunJob:
        """The fork server's request to run job ``jid`` of ``n`` steps (``disk``: the bytes
        of its job folder's own tmpfs, 0 for none)."""
        cfg = settings.current()
        rlimits = {
            "fsize": limits.STDIO_LIMIT_BYTES,
            "as": limits.CPU_ADDRESS_SPACE_BYTES if self.device.kind == "cpu" else None,
        }
        jv = paths.job_view
        return control.RunJob(id=jid, job=f"{jv}/job.json", jobdir=paths.jobdir, cache=paths.cache, cwd=jv,
                              home=paths.home, cache_root=paths.cache_view, steps=n, limits=rlimits,
                              disk_bytes=disk, tmp_bytes=cfg.job_tmp_bytes, shm_bytes=cfg.job_shm_bytes)

    def _run(self, task_dir: Path, steps: list[Step], roles: dict[str, Any], watch: BudgetWatch, principal: str,
             cache_key: str, abandon: Callable[[int], str] | None = None) -> JobResult:
        if self.server.closed:
            raise RunnerError("runner is closed")
        self.start()
        n = len(steps)
        jid = self.server.next_id()
        paths = self._paths(jid, principal, cache_key)
        work = paths.host
        work.mkdir()
        out_fd, disk = -1, 0
        w: Waiter | None = None
        try:
            self._prepare(paths, task_dir, steps, roles)
            out_fd = open_dir(work / "out")
            w = self.server.register(jid)
            disk = settings.current().job_disk_bytes if self.server.view_root else 0
            req = self._request(jid, paths, n, disk)
            oom_before = self.server.oom_kills()
            try:
                self.server.send(req)
            except RunnerError:
                self.server.forget(jid)
                raise
            t0 = watch.t0 = time.monotonic()
            if disk:  # the job's folder is on its own tmpfs, seen through the server's view
                w.started.wait(watch.timeout)
                os.close(out_fd)
                out_fd = -1
                out_fd = open_dir(Path(f"{self.server.view_root}{paths.jobdir}/out"))
            fired, why = self._watch(jid, w, out_fd, n, watch, abandon)
            if fired:
                self._kill(jid, w)
            seconds = time.monotonic() - t0
            self.server.forget(jid)
            if w.server_gone and not fired:
                raise RunnerError("the kws fork server died while a job ran: "
                                  + read_tail_path(self.server.log)[-1500:])
            end = JobEnd(fired=fired, status=w.status, oom=self.server.oom_kills() - oom_before > 0,
                         seconds=seconds, timeout=watch.timeout, step_timeout=watch.use.budget, ended=w.ended,
                         cancel_reason=why)
            res = collect(out_fd, work / "out", n, w.verified, end, result_bytes=settings.current().result_bytes,
                          verify_on=self.device.verifier, memory_note=self.server.memory_note)
            res.cpu_s, res.step_cpu_s, res.import_cpu_s = watch.use.cpu_s, watch.use.step_cpu_s, watch.use.import_cpu_s
            res.step_blocked_s, res.wait_s = watch.use.step_blocked_s, watch.use.wait
            res.import_budget_s = watch.import_budget
            if fired == "import":
                res.import_file = read_tail(out_fd, "importing.txt", 500)[0].strip()
            return res
        finally:
            if out_fd >= 0:
                os.close(out_fd)
            if disk and w is not None and w.exited.is_set():
                self.server.try_send(control.ReleaseJob(id=jid))
            shutil.rmtree(work, ignore_errors=True)

    def _watch(self, jid: int, w: Waiter, out_fd: int, n: int, watch: BudgetWatch,
               abandon: Callable[[int], str] | None = None) -> tuple[str, str]:
        """Wait for job ``jid`` of ``n`` steps to exit. Returns (the limit that fired, or
        ``""`` when it exited by itself; why ``abandon`` stopped it, or ""): ``"job"`` (its
        wall-clock limit), ``"cancelled"`` (``abandon`` said so for the running step) or
        what :meth:`BudgetWatch.fired <workstation.runner.limits.BudgetWatch.fired>` says. A
        step runs from when its ``.start`` file appears; the fork server is asked for a CPU
        reading every :data:`~workstation.runner.limits.CPU_POLL_S`, and ``abandon`` is
        asked as often."""
        while not w.exited.wait(0.05):
            now = time.monotonic()
            if watch.past_job_limit(now):
                return "job", ""
            while watch.current + 1 < n and exists(out_fd, f"step-{watch.current + 1}.start"):
                watch.step_began(now)
            seq = watch.next_ask(now)
            if seq is not None:
                self.server.try_send(control.CpuAsk(id=jid, seq=seq))
                why = abandon(watch.current) if abandon is not None else ""
                if why:
                    return "cancelled", why
            fired = watch.fired(now, w.cpu)
            if fired:
                return fired, ""
        return "", ""

    def _kill(self, jid: int, w: Waiter) -> None:
        """Have the fork server kill job ``jid`` and wait until it reports the job gone.

        Raises:
            RunnerError: it did not within :data:`KILL_GRACE_S`.
        """
        self.server.try_send(control.KillJob(id=jid))
        if not w.exited.wait(KILL_GRACE_S):
            raise RunnerError(f"the kws fork server did not end job {jid} within {KILL_GRACE_S:g} s of "
                              "being asked to kill it")
