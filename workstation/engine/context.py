"""What a check may use while it runs: :class:`CheckContext` and :class:`CallOutcome`.

A check never runs task code itself: it asks its context to run harness steps (the typed
Structs of :mod:`workstation.protocol.steps`) in isolated children
(:class:`~workstation.runner.sandbox.Runner`) and gets back :class:`CallOutcome` data,
which it compares here in the parent (:mod:`workstation.analysis.compare`).
"""

from __future__ import annotations

import copy
import functools
import json
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from workstation import settings
from workstation.analysis.compare import Comparison, ResolvedTolerance, compare, resolve_tolerance
from workstation.engine import kwscache, payloads
from workstation.engine.check import NotJudged
from workstation.engine.costs import CheckCost
from workstation.protocol.extras import E, decode_extra, extra_as
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.triton import InterpreterSelftestExtra
from workstation.protocol.results import Raised, StepDoc, decode_doc, encodable
from workstation.protocol.steps import (
    CallStep,
    Role,
    Step,
    TritonAotStep,
    TritonBoundsStep,
    kind_of,
    memo_key,
    principal,
    step_roles,
)
from workstation.protocol.wire import StepResult as _WireStep
from workstation.runner import JobCancelled, JobResult, Runner, RunnerError, StepResult
from workstation.runner.limits import wall_backstop
from workstation.runner.sandbox import tree_digest
from workstation.schema.text import safe_text, safe_tree
from workstation.task.backends import backend_mismatch, cannot_run, role_backend
from workstation.task.model import Task
from workstation.task.sources import TaskSources

#: step kinds whose results kws keeps across runs (in the parent, in kws's content-addressed
#: cache: see :meth:`CheckContext.result_cache_key`): the Triton AOT analysis and
#: bounds-proof's launch records with their TTIR, both functions of the task's files.
CACHED_STEPS = (TritonAotStep, TritonBoundsStep)

DEFAULT_SEEDS = (0, 1, 2)
#: the dtypes the Triton interpreter stores as raw bits (kws's fidelity layer emulates them).
EMULATED_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
Event = Callable[[str, dict[str, Any]], None]


#: a candidate's call step gets a CPU budget of max(the step budget, HANG_REF_FACTOR x the
#: reference's CPU seconds on the same case and seed) when the reference's are known, and a
#: wait budget of max(its CPU budget, HANG_REF_FACTOR x the reference's wall seconds on the
#: same case).
HANG_REF_FACTOR = 20.0
#: a step runs with CONFIRM_FACTOR x its CPU budget before it is a hang (one run: CPU
#: seconds do not inflate with load, so a re-run would confirm nothing more): a call slower
#: than its budget on a heavy case still finishes within it.
CONFIRM_FACTOR = 2.0


def step_timeout_s() -> float:
    """Per-step CPU budget (CPU seconds of all the job's processes, imports excluded): the
    ``step_timeout`` setting (``KWS_STEP_TIMEOUT``), default 30. It is also the floor of a
    candidate call's reference-relative budgets (:data:`HANG_REF_FACTOR`) and of every
    step's wait budget (blocked seconds); the wall-clock backstop is
    :func:`workstation.runner.limits.wall_backstop` of the larger budget."""
    return settings.current().step_timeout


def hang_limit() -> int:
    """Confirmed hangs of one principal after which kws runs none of its steps again in
    this run: the ``hang_limit`` setting (``KWS_HANG_LIMIT``), default 2 (a candidate that
    never returns costs two confirmed hangs, not one per call)."""
    return settings.current().hang_limit


class TaskDied(Exception):  # a verdict signal, like Skip
    """Raised by a check when task code ended a job it needed (a death, hang or forged
    result): the engine makes it a ``fail`` finding of that check, never an ``error``."""

    def __init__(self, message: str, evidence: dict[str, Any] | None = None):
        super().__init__(message)
        self.evidence = evidence or {}


def step_case(step: Step) -> dict[str, Any] | None:
    """The case a step runs (None for steps over several cases)."""
    case = getattr(step, "case", None)
    return dict(case) if isinstance(case, dict) else None


def case_label(case: dict[str, Any]) -> str:
    """``{"M": 64, "N": 1000, "dtype": "float16"}`` -> ``"M=64 N=1000 float16"``."""
    parts = [f"{k}={v}" for k, v in case.items() if k != "dtype"]
    if "dtype" in case:
        parts.append(str(case["dtype"]))
    return " ".join(parts)


@dataclass
class CallOutcome:
    """One call of a role on one case and seed, as the parent sees it.

    ``spec`` is the step that ran; ``step`` is the child's result (``None`` when the process died or timed out during
    it); ``death`` then says how (``JobResult.describe_death``) and ``death_status`` is
    ``"timeout"``, ``"signal"``, ``"exit"``, ``"forged"`` or ``"skipped"``. A ``"timeout"``
    with an empty :attr:`unjudged` and no :attr:`budget` is a confirmed hang (over
    :data:`CONFIRM_FACTOR` x its CPU budget, or blocked past its wait budget: ``limit``
    ``"step"`` or ``"blocked"``).
    """

    spec: Step
    step: StepResult | None
    death: str = ""
    death_status: str = ""
    signal_name: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    limit: str = ""
    #: it timed out at a budget of kws's own choosing (not charged to the task code).
    budget: bool = False
    #: why this death says nothing about the task code (a wall-clock backstop, the import
    #: budget, the job's limit): the checks that needed it are not judged; "" otherwise.
    unjudged: str = ""
    #: a forged step: what kws's fork server saw changed in the job from outside.
    forged_changes: list[str] | None = None

    @property
    def verified(self) -> list[str] | None:
        """What the fork server saw changed in the job after this step (watched
        namespaces, :mod:`workstation.harness.watch`), None when it did not check."""
        if self.step is not None:
            return self.step.verified
        return self.forged_changes

    @property
    def ok(self) -> bool:
        return self.step is not None and self.step.ok

    @property
    def outputs(self):
        return self.step.outputs if self.step is not None else []

    @property
    def error(self) -> Raised | None:
        """What the step's code raised (None when it returned or did not finish)."""
        return self.step.error if self.step is not None else None

    def payload(self, cls: type[E]) -> E:
        """The step's own payload (``step.extra``) as the Struct ``cls`` of its kind
        (:mod:`workstation.protocol.extras`: ``out.payload(CallExtra).inputs``).

        Raises:
            LookupError: the step did not finish (no result): a reader that did not ask.
            TypeError: the step is of another kind than ``cls``'s: a kws bug in the reader.
        """
        if self.step is None:
            raise LookupError(f"the {kind_of(self.spec)} step has no result ({self.death or 'it did not finish'})")
        return extra_as(self.step.extra, cls)

    def failure_class(self) -> str | None:
        """The contract's failure class of this call, or None when it returned:
        ``compile-error`` (Triton or an extension build rejected it), ``runtime-error``
        (it raised), ``crash`` (the process died, or its result was forged), ``timeout``
        (it hung, now or earlier in the run: ``death_status`` ``"skipped"``)."""
        if self.step is None:
            return "timeout" if self.death_status in ("timeout", "skipped") else "crash"
        if self.step.ok:
            return None
        origin = self.step.error.origin if self.step.error is not None else None
        return "compile-error" if origin in ("triton-compile", "build") else "runtime-error"

    def failure_evidence(self) -> dict[str, Any]:
        """Evidence for a call that did not return: the exception or the death, its
        task-derived texts made safe (:func:`workstation.schema.text.safe_tree`: control
        characters escaped, each text cut at 4000 characters with its size and hash)."""
        if self.step is None:
            ev: dict[str, Any] = {"death": self.death, "status": self.death_status}
            if self.limit:
                ev["limit"] = self.limit
            if self.signal_name:
                ev["signal"] = self.signal_name
            if self.stderr_tail:
                ev["stderr_tail"] = safe_text(self.stderr_tail[-2000:])
            if self.stdout_bytes > 65536:
                ev["stdout_bytes"] = self.stdout_bytes
            return ev
        err = self.step.error.as_evidence() if self.step.error is not None else {}
        tb = err.pop("traceback", "")
        err["traceback_tail"] = "\n".join(tb.strip().splitlines()[-12:])
        return safe_tree(err, 4000)

    def failure_text(self) -> str:
        """One line: ``raised ValueError: ...`` / ``crashed: its process died from SIGABRT``; the
        exception's type (at most 200 characters) and message (its first line, at most 200)
        made safe (:func:`workstation.schema.text.safe_text`)."""
        if self.step is None:
            return safe_text(self.death)
        err = self.step.error
        if err is None:
            return "raised None: "
        loc = f" ({err.where.file}:{err.where.line})" if err.where is not None else ""
        msg = err.message.strip().splitlines()
        text = f"raised {safe_text(err.type, 200)}: {safe_text(msg[0], 200) if msg else ''}"
        return text + safe_text(loc, 400)


class Stash:
    """The one per-run store of memoised work, shared by every check of an engine run.

    Keys are hashable; the first caller of a key computes its value while later callers
    wait for it; an exception reaches every waiter and the key is forgotten, so a later
    caller tries again. Used for the role calls on equal steps (:meth:`CheckContext.calls`),
    the numerics audit, kws's own timing measurement, and any other work several checks
    share.
    """

    def __init__(self) -> None:
        self._futures: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()

    def claim(self, keys: list[Any]) -> tuple[list[Future[Any]], list[int]]:
        """One future per key, and the indices of the keys this caller must compute
        (then :meth:`fulfil` or :meth:`fail` them)."""
        futs, mine = [], []
        with self._lock:
            for i, k in enumerate(keys):
                f = self._futures.get(k)
                if f is None:
                    f = self._futures[k] = Future()
                    mine.append(i)
                futs.append(f)
        return futs, mine

    def fail(self, keys: list[Any], futs: list[Future[Any]], e: BaseException) -> None:
        """Propagate ``e`` to the waiters of ``futs`` and forget their ``keys``."""
        for f in futs:
            if not f.done():
                f.set_exception(e)
        with self._lock:
            for k in keys:
                self._futures.pop(k, None)

    def once(self, key: Any, fn: Callable[[], Any], *, cache_errors: bool = False) -> Any:
        """``fn()``, computed once per run for ``key`` (others wait for the first caller).
        With ``cache_errors`` an exception is kept too (every later caller gets it without
        recomputing); otherwise the next caller tries again."""
        (fut,), mine = self.claim([key])
        if mine:
            try:
                fut.set_result(fn())
            except BaseException as e:
                if cache_errors:
                    fut.set_exception(e)
                else:
                    self.fail([key], [fut], e)
                    raise
        return fut.result()


class CheckContext:
    """What a check may use: the task, the device, seeds, and ways to run task code.

    Thread-safe; shared by every check of one engine run. Work several checks need (the
    reference's and candidate's results on equal steps, the numerics audit, the timing
    measurement) is computed once, in :attr:`stash`.
    """

    def __init__(self, task: Task, runner: Runner, *, seeds: Iterable[int] = DEFAULT_SEEDS,
                 task_arg: str | None = None, case_filter: dict[str, Any] | None = None):
        self.task = task
        self.runner = runner
        self.seeds = tuple(seeds)
        self.task_arg = task_arg or str(task.dir)
        self.case_filter = case_filter
        self.stash = Stash()
        #: results of the checks finished so far in this run (``after`` checks read them).
        self.results: dict[str, Any] = {}
        #: content digest of the task folder before any task code ran.
        self.task_digest_before: str | None = None
        self.notes: list[str] = []
        #: kws extension keys of the report, filled by checks (:meth:`extend_report`).
        self.extensions: dict[str, dict[str, Any]] = {}
        self._ext_lock = threading.Lock()
        #: every call step this run executed, with its outcome (:meth:`call_log`).
        self._call_log: list[tuple[CallStep, CallOutcome]] = []
        self._log_lock = threading.Lock()

        #: one id per engine run: compiler caches are per task run and principal.
        self.run_id = uuid.uuid4().hex[:12]
        #: the check this view belongs to ("" for the run's shared context), and the
        #: deaths of task code its calls met (:meth:`for_check`).
        self.check_id = ""
        self.ledger: list[dict[str, Any]] = []
        self._ledger_seen: set[int] = set()
        #: what this check's view could not judge (:meth:`could_not_judge`).
        self._unjudged: list[str] = []
        #: the jobs this view ran (``kws check --timings``; the shared context's are no check's).
        self.cost = CheckCost()
        #: principal -> timeouts in this run; (principal, case) pairs that timed out.
        self._hangs: dict[str, list[str]] = {}
        self._hung_cases: set[tuple[str, str]] = set()
        self._hang_lock = threading.Lock()
        #: (case as JSON, seed) -> the reference's CPU seconds on it (a candidate's budget).
        self._ref_cpu: dict[tuple[str, int], float] = {}
        #: case as JSON -> the reference's wall seconds on it, imports excluded (a candidate's
        #: wait budget).
        self._ref_wall: dict[str, float] = {}

    def extend_report(self, key: str, part: str, value: Any) -> None:
        """Put ``value`` under ``report[key][part]`` of the run's JSON report (a kws
        extension key beside the contract's; e.g. ``profile.self``). Thread-safe: checks
        running in parallel may fill parts of one key."""
        with self._ext_lock:
            self.extensions.setdefault(key, {})[part] = value

    def update_report(self, key: str, fn: Callable[[Any], None]) -> None:
        """Update the report's extension table ``report[key]`` in place with ``fn(table)``
        (the table starts empty), under the lock that :meth:`extend_report` takes: for a
        table several jobs and checks add rows to (e.g. ``imports``)."""
        with self._ext_lock:
            fn(self.extensions.setdefault(key, {}))

    def for_check(self, check_id: str) -> CheckContext:
        """A view of this context for one check: everything shared (the stash, the
        results, the runner, what hung) except its :attr:`ledger` of task-code deaths."""
        view = copy.copy(self)
        view.check_id = check_id
        view.ledger = []
        view._ledger_seen = set()
        view._unjudged = []
        view.cost = CheckCost()
        return view

    def could_not_judge(self, reason: str) -> None:
        """Say that a part of this check's run that could have produced a ``fail`` did not
        run here, for a reason of this run or this machine (a step killed at a limit, an
        import that failed, a tool that is missing), and go on judging the rest. The engine
        lists the check under the report's ``not_judged`` with every such reason (joined by
        "; ") and never reports it ``pass``: with no ``warn``/``fail`` finding its status is
        ``skip``. A part that is structurally impossible on this device class and documented
        so (a GPU-only tool on the CPU) is an ``info`` finding instead. On the check's own
        view (:meth:`for_check`); thread-safe for a check that fans out (a list append)."""
        self._unjudged.append(reason)

    @property
    def unjudged(self) -> list[str]:
        """The reasons given to :meth:`could_not_judge` on this view, in order, without
        repeats."""
        return list(dict.fromkeys(self._unjudged))

    # -- task facts --------------------------------------------------------------------

    @property
    def sources(self) -> TaskSources:
        """The task's Python files, parsed once (:mod:`workstation.task.sources`)."""
        return self.stash.once(TaskSources, lambda: TaskSources(self.task.dir))

    @property
    def derivation(self):
        """What this run's randomised choices are seeded from
        (:class:`~workstation.engine.derivation.Derivation`: the task version and the kws
        version), computed once per run."""
        from workstation.engine.derivation import derivation_for

        return self.stash.once("derivation", lambda: derivation_for(self.task.dir, task_id=self.task.id))

    @property
    def derivation_seed(self) -> int:
        """The seed of every randomised choice a check makes of its own (derived cases and
        their inputs): the same for the same task version and kws version on any machine."""
        return self.derivation.seed

    @property
    def device(self):
        return self.runner.device

    @property
    def on_gpu(self) -> bool:
        return self.runner.device.kind == "cuda"

    @property
    def all_cases(self) -> list[dict[str, Any]]:
        """The declared cases (or the one case given with ``--case``), judged or not."""
        return [dict(self.case_filter)] if self.case_filter else [dict(c) for c in self.task.cases]

    def backend_of(self, role: str) -> str | None:
        """The declared backend of ``role``'s code (:func:`~workstation.task.backends.role_backend`:
        task.toml's ``backend`` / ``[backends]``, never the imports). When the imports suggest
        another one, the report says so once under the extension key ``backend_notes``
        (:func:`~workstation.task.backends.backend_mismatch`)."""
        def declared() -> str | None:
            note = backend_mismatch(self.task, role, self.sources)
            if note:
                self.extend_report("backend_notes", role, note)
            return role_backend(self.task, role)

        return self.stash.once(("backend_of", role), declared)

    def cannot_run(self, role: str) -> str | None:
        """Why ``role``'s code cannot run on this device (a CUDA extension without a GPU, a
        Pallas kernel without JAX, an NKI kernel without a simulator), or ``None``."""
        d = self.runner.device
        return cannot_run(self.backend_of(role), d.kind, d.versions)

    def task_folder_changed(self) -> bool:
        """Whether the task folder's content digest now differs from
        :attr:`task_digest_before` (False when none was taken): how a check sees a change that
        task code made to the folder it was copied from, without reaching the runner.

        Raises:
            workstation.runner.TaskFolderError: the folder now holds an entry kws refuses (a
                device node, a FIFO, a symlink leaving it).
        """
        return self.task_digest_before is not None and tree_digest(self.task.dir) != self.task_digest_before

    def call_log(self) -> list[tuple[CallStep, CallOutcome]]:
        """Every ``call`` step this run has executed so far, with its outcome, in the order
        they finished (memoised steps once): the cases "the battery ran", for the checks
        of phase ``after`` that replay them on another role."""
        with self._log_lock:
            return list(self._call_log)

    @property
    def cases(self) -> list[dict[str, Any]]:
        """The declared cases (or the one case given with ``--case``) whose dtype the
        device computes right: on the CPU, a Triton candidate's case in a dtype the
        interpreter fidelity self-test fails (:meth:`unjudged_reason`) is left out, so no
        check judges interpreter garbage; ``correctness`` reports each one left out.

        Raises:
            Skip: every case is left out (the check's status is then ``skip`` with why).
        """
        cases = self.all_cases
        judged = [c for c in cases if self.unjudged_reason(str(c.get("dtype", ""))) is None]
        if cases and not judged:
            from workstation.engine.check import Skip

            raise Skip("no case kws can judge here: " + "; ".join(
                sorted({f"{c.get('dtype')}: {self.unjudged_reason(str(c.get('dtype', '')))}" for c in cases})))
        return judged

    def interpreter_fidelity(self) -> InterpreterSelftestExtra | str:
        """The interpreter fidelity self-test of this run (one ``interpreter_selftest``
        step, memoised): the step's payload, or why it did not run (its failure text).

        Raises:
            TypeError: the step sent another kind's payload (a kws bug).
        """
        def run() -> InterpreterSelftestExtra | str:
            from workstation.protocol.steps import InterpreterSelftestStep

            out = self.run_steps([InterpreterSelftestStep()])[0]
            if not out.ok or out.step is None:
                return out.failure_text()
            return extra_as(out.step.extra, InterpreterSelftestExtra)

        return self.stash.once("interpreter_fidelity", run)

    def unjudged_reason(self, dtype: str) -> str | None:
        """Why kws cannot judge a Triton candidate's ``dtype`` on this device (None: it
        can): only under the interpreter, only for the dtypes it stores as raw bits
        (:data:`EMULATED_DTYPES`), and only when the self-test fails for that dtype."""
        if dtype not in EMULATED_DTYPES or self.task.backend != "triton" or self.runner is None or self.on_gpu:
            return None
        st = self.interpreter_fidelity()
        if isinstance(st, str):
            return f"the interpreter self-test could not run ({st[:200]})"
        res = st.selftest.dtypes.get(dtype) if st.selftest is not None else None
        if res is None:
            return f"the interpreter self-test does not cover {dtype}"
        if not res.ok:
            bad = [k for k, v in res.probes.items() if not v] or [res.error or "?"]
            return (f"the Triton interpreter does not compute {dtype} as compiled Triton does here "
                    f"(self-test probes failed: {', '.join(bad)})")
        return None

    def tolerance(self, case: dict[str, Any], out_dtype: str) -> ResolvedTolerance:
        """The declared tolerance for ``case`` (per-dtype override by the case dtype, then
        the kws extensions ``[[case_tolerance]]`` and ``[tolerance_rule]``, see
        :meth:`Task.tolerance_for_case`), completed with torch.testing's defaults for
        ``out_dtype``."""
        return resolve_tolerance(self.task.tolerance_for_case(case), out_dtype)

    def repro(self, check: str, case: dict[str, Any] | None = None, seed: int | None = None) -> str:
        """A shell command that reruns ``check`` (on ``case`` and ``seed`` when given)."""
        cmd = ["kws", "check", self.task_arg, "--only", check]
        if case is not None:
            cmd += ["--case", json.dumps(case, sort_keys=True)]
        if seed is not None:
            cmd += ["--seeds", str(seed)]
        return shlex.join(cmd)

    # -- running task code -------------------------------------------------------------

    def run_job(self, steps: list[Step], *, exclusive: bool = False,
                step_timeout: float | None = None) -> JobResult:
        """Run harness steps (of one principal) in one child (see :mod:`workstation.harness`).
        A job that task code ended is noted in this check's :attr:`ledger`.

        Raises:
            StepError: a step does not have its declared form.
            ValueError: the steps belong to more than one principal (a kws bug).
            RunnerError: the runner failed.
            NotJudged: a step runs a role whose backend cannot run here (:meth:`cannot_run`):
                the check that asked is ``skip`` with the reason, as not judged; or the job
                was stopped at a time limit other than its wait budget (a CPU budget is not
                doubled here, so it is no confirmed hang; a wall-clock or import limit says
                nothing about the code); or the steps' principal has hung
                :func:`hang_limit` times in this run. A step blocked past its wait budget is
                a confirmed hang of its principal: recorded (:func:`hang_limit`) and noted in
                the ledger.
        """
        for who in sorted({principal(s) for s in steps}):
            if hung := self._role_hung(who):
                raise NotJudged(f"the {who} {hung}")
        job = self._run_job(steps, exclusive=exclusive, step_timeout=step_timeout)
        if job.status == "timeout" and job.limit == "blocked":
            i = job.died_in_step if job.died_in_step is not None else 0
            self._record_hang(steps[min(i, len(steps) - 1)], job.describe_death())
        elif job.status == "timeout" or job.status == "cancelled":
            i = job.died_in_step if job.died_in_step is not None else 0
            who = principal(steps[min(i, len(steps) - 1)])
            raise NotJudged(f"the {who}'s {kind_of(steps[min(i, len(steps) - 1)])} step {job.describe_death()}; "
                            "kws could not judge it (a time limit alone, not a confirmed hang)")
        if job.died:
            i = job.died_in_step if job.died_in_step is not None else next(iter(job.forged), 0)
            self._note(None, {"role": principal(steps[min(i, len(steps) - 1)]), "step": kind_of(steps[0]),
                              "death": job.describe_death(), "status": job.status, "limit": job.limit,
                              "stderr_tail": safe_text(job.stderr_tail[-1500:])})
        return job

    def _run_job(self, steps: list[Step], *, exclusive: bool = False, step_timeout: float | None = None,
                 cancel: Callable[[], str] | None = None, budgets: list[float] | None = None,
                 waits: list[float] | None = None, abandon: Callable[[int], str] | None = None) -> JobResult:
        for s in steps:
            for role in sorted(step_roles(s)):
                why = self.cannot_run(role)
                if why:
                    raise NotJudged(f"the {role} ({self.backend_of(role)}) cannot run here: {why}")
                if known := self.refused(role):
                    raise NotJudged(known)
                if role != principal(s) and (hung := self._role_hung(role)):  # its own hangs: run_steps
                    raise NotJudged(f"the {kind_of(s)} step calls the {role}, which {hung}")
        who = {principal(s) for s in steps}
        if len(who) > 1:
            raise ValueError(f"one job runs one principal's steps; got {sorted(who)}")
        st = step_timeout or step_timeout_s()
        budgets = list(budgets) if budgets is not None else [st] * len(steps)
        waits = list(waits) if waits is not None else [max(b, step_timeout_s()) for b in budgets]
        imp = settings.current().import_budget
        # the job's wall-clock limit: every step's backstop and the imports' backstop
        limit = 60 + sum(wall_backstop(max(b, w)) for b, w in zip(budgets, waits, strict=True)) + wall_backstop(imp)
        t = self.task
        started = time.monotonic()
        job = self.runner.run(t.dir, steps, timeout=limit, exclusive=exclusive,
                              entry={k: str(v) for k, v in t.entry.items()}, out_args=list(t.out_args),
                              inout_args=list(t.inout_args), step_timeout=st, principal=next(iter(who), "job"),
                              cache_key=f"{t.id}-{self.run_id}", cancel=cancel,
                              helper_dirs=[str(h) for h in t.helper_dirs], step_budgets=list(budgets),
                              import_budget=imp, target=t.extensions.target, wait_budgets=list(waits),
                              abandon=abandon)
        self.cost.add_job(wall_s=time.monotonic() - started, cpu_s=job.cpu_s, queued_s=job.admission_wait_s)
        payloads.take_notes(self, steps, job.steps)
        if job.died and job.status not in ("timeout", "cancelled") and not job.forged \
                and all(x is None for x in job.steps) and job.died_in_step is None:
            raise RunnerError(f"a job ended before its first step ({job.describe_death()}): "
                              f"{safe_text(job.stderr_tail[-2000:])}")
        return job

    def _budget(self, step: Step, st: float) -> float:
        """The CPU budget of ``step``: ``st``, or for a candidate's call on a case and seed
        whose reference CPU seconds are known, max(``st``, :data:`HANG_REF_FACTOR` x them);
        for kws's Triton AOT compile (:class:`~workstation.protocol.steps.TritonAotStep`, every
        autotune config lowered for sm_90: minutes of CPU for a real library) max(``st``, the
        ``aot_budget`` setting)."""
        if isinstance(step, TritonAotStep):
            return max(st, settings.current().aot_budget)
        if isinstance(step, CallStep) and step.role == "candidate":
            ref = self._ref_cpu.get((json.dumps(dict(step.case), sort_keys=True), int(step.seed)))
            if ref is not None:
                return max(st, HANG_REF_FACTOR * ref)
        return st

    def _wait(self, step: Step, budget: float) -> float:
        """The wait budget of ``step`` (blocked seconds: no thread of its job running or
        waiting to run) when its CPU budget is ``budget``: max(``budget``, the step budget
        :func:`step_timeout_s`), for a candidate's call on a case whose reference wall
        seconds are known at least :data:`HANG_REF_FACTOR` x them (on a GPU, waiting for the
        device is work: the reference's wall includes it)."""
        wait = max(budget, step_timeout_s())
        if isinstance(step, CallStep) and step.role == "candidate":
            ref = self._ref_wall.get(json.dumps(dict(step.case), sort_keys=True))
            if ref is not None:
                wait = max(wait, HANG_REF_FACTOR * ref)
        return wait

    def _learn_reference(self, step: Step, st: StepResult | None) -> None:
        if st is None or not st.ok or not isinstance(step, CallStep) or step.role != "reference":
            return
        cpu = st.cpu_s
        wall = max(0.0, st.step_seconds - sum(v.wall_s for v in st.imports.values()))
        case = json.dumps(dict(step.case), sort_keys=True)
        key = (case, int(step.seed))
        with self._hang_lock:
            self._ref_cpu[key] = max(cpu, self._ref_cpu.get(key, 0.0))
            self._ref_wall[case] = max(wall, self._ref_wall.get(case, 0.0))

    def _note(self, outcome: CallOutcome | None, entry: dict[str, Any] | None = None) -> None:
        """Add a task-code death to this check's ledger (once per outcome); a death that
        says nothing about the task code (:attr:`CallOutcome.unjudged`, a kws budget) is
        not one."""
        if outcome is not None:
            if outcome.step is not None or outcome.budget or outcome.unjudged or id(outcome) in self._ledger_seen:
                return
            self._ledger_seen.add(id(outcome))
            spec = outcome.spec
            entry = {"role": principal(spec), "step": kind_of(spec), "death": outcome.death,
                     "status": outcome.death_status, **({"limit": outcome.limit} if outcome.limit else {})}
            case = step_case(spec)
            if case is not None:
                entry["case"] = case
            seed = getattr(spec, "seed", None)
            if seed is not None:
                entry["seed"] = seed
            if outcome.stderr_tail:
                entry["stderr_tail"] = safe_text(outcome.stderr_tail[-1500:])
        if entry is not None:
            self.ledger.append(entry)

    def _role_hung(self, role: str) -> str:
        """Why kws runs no more of ``role``'s code in this run (it hung :func:`hang_limit`
        times), or ""."""
        with self._hang_lock:
            hangs = self._hangs.get(role, [])
            if len(hangs) < hang_limit():
                return ""
            return f"hung {len(hangs)} times in this run (on {', '.join(hangs[:3])}); kws does not wait for it again"

    def _case_hung(self, step: Step) -> bool:
        """Whether ``step``'s principal hung on ``step``'s case in this run."""
        case = step_case(step)
        with self._hang_lock:
            return case is not None and (principal(step), json.dumps(case, sort_keys=True)) in self._hung_cases

    def _hung(self, step: Step, verb: str = "was not run") -> str:
        """Why ``step`` is not run, or is stopped while it runs (``verb``), or "": its
        principal hung :func:`hang_limit` times in this run, or on the step's case."""
        who = principal(step)
        case = step_case(step)
        with self._hang_lock:
            hangs = self._hangs.get(who, [])
            if len(hangs) >= hang_limit():
                return (f"{verb}: the {who} hung {len(hangs)} times in this run (on {', '.join(hangs[:3])}: over "
                        f"{CONFIRM_FACTOR:g} x its CPU budget, or blocked past its wait budget); kws does not wait "
                        "for it again")
            if case is not None and (who, json.dumps(case, sort_keys=True)) in self._hung_cases:
                return f"{verb}: the {who} hung on case {case_label(case)} in this run; kws does not wait for it again"
        return ""

    def _record_hang(self, step: Step, death: str) -> None:
        who = principal(step)
        case = step_case(step)
        with self._hang_lock:
            where = f"case {case_label(case)}" if case is not None else kind_of(step)
            self._hangs.setdefault(who, []).append(where)
            if case is not None:
                self._hung_cases.add((who, json.dumps(case, sort_keys=True)))

    def run_steps(self, steps: Sequence[Step], *, step_timeout: float | None = None,
                  budget: bool = False) -> list[CallOutcome]:
        """Run steps in as few children as possible, one principal per child (a candidate
        and a reference never share a process; groups of different principals run side by
        side): when a child dies in step k, step k becomes a death outcome and the
        remaining steps continue in a fresh child. A step of a principal that hung earlier
        in this run (on its case, or :func:`hang_limit` times at all) is not run: its
        outcome is a ``"skipped"`` death naming the earlier hang. ``budget``: ``step_timeout``
        is a budget of kws's own choosing (derived cases on the CPU): a step over it is
        not charged to the task code (no hang recorded, nothing in the ledger) and not
        given twice it; a step blocked past its wait budget still hangs.

        Budgets are CPU seconds (``step_timeout``, default :func:`step_timeout_s`; a
        candidate's call: :meth:`_budget`), and a step runs with :data:`CONFIRM_FACTOR` x its
        budget: over that it is a hang (``"timeout"``, limit ``"step"``, recorded for
        :func:`hang_limit`); so is a step blocked past its wait budget (:meth:`_wait`, limit
        ``"blocked"``: a sleep, a blocked read, a deadlock), at once. When its principal
        reaches :func:`hang_limit`, or hangs on the case of a step that runs or waits for a
        slot, that job is killed or not started (``"skipped"``): kws does not wait for a
        hung principal again.

        Raises:
            NotJudged: (without ``budget``) a step was stopped by a limit that says nothing
                about the task code (the wall-clock backstop, the import budget, the job's
                limit): the check could not judge it.
        """
        out = self._run_steps(steps, step_timeout, budget)
        if not budget:
            self._raise_unjudged(out)
        return out

    @staticmethod
    def _raise_unjudged(outcomes: list[CallOutcome]) -> None:
        bad = [o for o in outcomes if o.unjudged]
        if bad:
            o = bad[0]
            case = step_case(o.spec)
            where = f" on case {case_label(case)}" if case is not None else ""
            spec_seed = getattr(o.spec, "seed", None)
            seed = f" (seed {spec_seed})" if spec_seed is not None else ""
            more = f"; {len(bad) - 1} more step(s) the same way" if len(bad) > 1 else ""
            raise NotJudged(f"the {principal(o.spec)} {o.unjudged}{where}{seed}{more}; kws could not judge them")

    def _run_steps(self, steps: Sequence[Step], step_timeout: float | None, budget: bool) -> list[CallOutcome]:
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(steps):
            groups.setdefault(principal(s), []).append(i)
        outcomes: list[CallOutcome | None] = [None] * len(steps)

        def run_group(idx: list[int]) -> None:
            for i, o in zip(idx, self._run_group([steps[i] for i in idx], step_timeout, budget), strict=True):
                outcomes[i] = o

        items = list(groups.values())
        if len(items) == 1:
            run_group(items[0])
        else:
            with ThreadPoolExecutor(max_workers=len(items)) as ex:
                for f in [ex.submit(run_group, idx) for idx in items]:
                    f.result()
        out = [o for o in outcomes if o is not None]
        for o in out:
            self._note(o)
        with self._log_lock:
            self._call_log.extend((o.spec, o) for o in out if isinstance(o.spec, CallStep))
        self._task_problem(out)
        return out

    def _run_group(self, steps: list[Step], step_timeout: float | None, budget: bool) -> list[CallOutcome]:
        outcomes: list[CallOutcome | None] = [None] * len(steps)
        start = 0
        while start < len(steps):
            why = self._hung(steps[start])
            if why:
                outcomes[start] = self._skipped(steps[start], why)
                start += 1
                continue
            # run up to the next step that must be skipped
            end = start + 1
            while end < len(steps) and not self._hung(steps[end]):
                end += 1
            st0 = step_timeout or step_timeout_s()
            group = steps[start:end]
            plain = [self._budget(x, st0) for x in group]
            try:
                job = self._run_job(group, step_timeout=step_timeout,
                                    budgets=[b * (1.0 if budget else CONFIRM_FACTOR) for b in plain],
                                    waits=[self._wait(x, b) for x, b in zip(group, plain, strict=True)],
                                    cancel=functools.partial(self._hung, steps[start]),
                                    abandon=self._stopper(group))
            except JobCancelled:
                continue  # the principal hung while this job waited for a slot: skipped above
            died = None
            for i, st in enumerate(job.steps):
                self._learn_reference(steps[start + i], st)
                if st is not None:
                    outcomes[start + i] = CallOutcome(steps[start + i], st, stdout_tail=job.stdout_tail,
                                                      stderr_tail=job.stderr_tail, stdout_bytes=job.stdout_bytes)
                elif i in job.forged:
                    outcomes[start + i] = CallOutcome(
                        steps[start + i], None, death=f"its result cannot be trusted: {job.forged[i]}",
                        death_status="forged", stdout_tail=job.stdout_tail, stderr_tail=job.stderr_tail,
                        stdout_bytes=job.stdout_bytes, forged_changes=job.forged_changes.get(i))
                elif died is None:
                    died = i
            if died is None:
                start = end
                continue
            k = start + died
            outcomes[k] = self._death(steps[k], job, budget, st0)
            for i in range(died + 1, end - start):  # not run: the process died before them
                outcomes[start + i] = None
            start = k + 1
        return [o for o in outcomes if o is not None]

    def _skipped(self, step: Step, why: str) -> CallOutcome:
        """The ``"skipped"`` outcome of ``step``, not run or stopped because its principal
        hung (``why``). A step on a case its principal hung on meets that hang itself: it
        counts as a hang of its own (:func:`hang_limit`) and is a death of the task code like
        the first (the check that needed it fails, whichever check's call came first: the
        verdicts do not depend on the order the machine's load gives the checks). A step
        skipped because its principal reached :func:`hang_limit` on other cases is not judged
        (:attr:`CallOutcome.unjudged`: the check that needed it could not look)."""
        if self._case_hung(step):
            self._record_hang(step, why)
            return CallOutcome(step, None, death=why, death_status="skipped")
        return CallOutcome(step, None, death=why, death_status="skipped", unjudged=why)

    def _stopper(self, group: list[Step]) -> Callable[[int], str]:
        """The ``abandon`` hook of a job running ``group``: why to stop it while step ``i``
        runs (its principal hung meanwhile: :meth:`_hung`), or ""."""
        def stop(i: int) -> str:
            return self._hung(group[min(max(i, 0), len(group) - 1)], "was stopped")

        return stop

    def _death(self, step: Step, job: JobResult, budget: bool, st: float) -> CallOutcome:
        """The outcome of ``step``, in which ``job`` died (module doc of :meth:`run_steps`):
        a step over :data:`CONFIRM_FACTOR` x its CPU budget, or blocked past its wait
        budget, is a confirmed hang and recorded; a job stopped because its principal hung
        meanwhile is ``"skipped"``; a stop by a limit that says nothing about the code is
        :attr:`CallOutcome.unjudged`."""
        if job.status == "cancelled":
            return self._skipped(step, job.cancel_reason)
        death = job.describe_death()
        if job.status == "timeout" and job.limit == "step" and not budget:
            b = job.step_timeout_s or CONFIRM_FACTOR * self._budget(step, st)
            death = (f"did not finish within {b:g} CPU s ({CONFIRM_FACTOR:g} x its {b / CONFIRM_FACTOR:g} CPU s "
                     "budget, KWS_STEP_TIMEOUT or 20 x the reference's CPU on the case) and was killed")
        # a step blocked past its wait budget hangs whatever its CPU budget: kws's own choice
        # of that (``budget``) does not make a sleep or a deadlock any less one
        hang = job.status == "timeout" and (job.limit == "blocked" or (job.limit == "step" and not budget))
        o = CallOutcome(step, None, death=death, death_status=job.status, signal_name=job.signal_name,
                        stdout_tail=job.stdout_tail, stderr_tail=job.stderr_tail, stdout_bytes=job.stdout_bytes,
                        limit=job.limit, budget=budget and job.status == "timeout" and not hang)
        if hang:
            self._record_hang(step, death)
        elif job.status == "timeout" and not budget:
            o.unjudged = death
        return o

    def refuse_role(self, role: str, why: str) -> None:
        """Remember for the rest of the run that ``role``'s code cannot run on this machine
        (a library it imports is not installed, a GPU feature the stand-in cannot answer):
        every later job of the role is refused with ``why`` (:meth:`run_job`). The first
        reason given stays."""
        self.stash.once("refused_roles", dict).setdefault(role, why)

    def refused(self, role: str) -> str | None:
        """Why ``role``'s code cannot run here (:meth:`refuse_role`), or None."""
        got: str | None = self.stash.once("refused_roles", dict).get(role)
        return got

    def _task_problem(self, outcomes: list[CallOutcome]) -> None:
        """Refuse to judge from steps whose failure is the task's or the machine's, not the
        role's:

        - an error's causes (:mod:`workstation.engine.payloads`: a library that is not
          installed here, a limit of the device stand-in or of the CUDA emulation, a
          task-format problem only a job child sees): their handlers raise
          :class:`~workstation.engine.check.NotJudged` or
          :class:`~workstation.engine.check.TaskProblem`;
        - ``make_inputs`` raised, exited or returned what the contract does not allow
          (harness ``InputsProblem``) on a declared case:
          :class:`~workstation.engine.check.TaskProblem` naming the inputs file. A derived
          case ``make_inputs`` fails on stays a failed call (kws drops such cases)."""
        from workstation.engine.check import TaskProblem

        payloads.judge_causes(self, outcomes)
        declared = [dict(c) for c in self.task.cases]
        inputs_ep = str(self.task.entry["inputs"]) if "inputs" in self.task.entry else "make_inputs"
        for o in outcomes:
            case = getattr(o.spec, "case", None)
            if o.error is not None and o.error.phase == "make_inputs" and case is not None and dict(case) in declared:
                raise TaskProblem(inputs_ep, f"on the declared case {case_label(dict(case))}: {o.failure_text()}")

    def _reference_problem(self, pairs: list[tuple[dict[str, Any], int]], outs: list[CallOutcome]) -> None:
        """Raise :class:`~workstation.engine.check.TaskProblem` (blaming the reference) when
        the reference, on a declared case and its untransformed inputs, raised, or returned
        non-finite values for finite inputs where the contract does not admit non-finite
        inputs (``[contract] nonfinite_inputs = false``): the yardstick is broken there, so no
        comparison with it judges the candidate."""
        import numpy as np

        from workstation.engine.check import TaskProblem

        declared = [dict(c) for c in self.task.cases]
        ref_ep = str(self.task.entry["reference"])
        for (case, seed), o in zip(pairs, outs, strict=True):
            if dict(case) not in declared or o.step is None:
                continue
            where = f"the declared case {case_label(dict(case))} (seed {seed})"
            if not o.ok:
                if o.error is not None and o.error.phase in ("call", "import"):
                    raise TaskProblem(ref_ep, f"the reference {o.failure_text()} on {where}")
                continue
            if self.task.contract.nonfinite_inputs:
                continue
            ins = [d for d in o.payload(CallExtra).inputs if d.kind == "tensor"]
            if not ins or not all(d.finite is True for d in ins):
                continue
            for j, t in enumerate(o.outputs):
                v = t.values
                if v.dtype.kind in "fc" and (bad := int(v.size - np.isfinite(v).sum())):
                    raise TaskProblem(ref_ep, f"the reference returns {bad} non-finite value(s) of {v.size} in "
                                      f"output {j} on {where}, for finite inputs ([contract] nonfinite_inputs = "
                                      "false: the reference must be finite there)")

    def result_cache_key(self, step: Step) -> str | None:
        """The key of ``step``'s result in kws's own result cache, or None when it is not
        kept: only :data:`CACHED_STEPS` (the AOT compile analysis, seconds of work that
        depend only on the task's files and the versions) once the task's content digest
        is known. The parent computes the key (the step, the task folder's digest, the
        device, kws/torch/triton versions) and writes the entry itself, and only for a
        result kws's fork server checked from outside with nothing changed: task code can
        neither choose the key nor write the cache, so it can poison no other task (its
        own forged result would need its own files, byte for byte)."""
        if not isinstance(step, CACHED_STEPS) or not self.task_digest_before:
            return None
        import hashlib

        dev = self.runner.device
        blob = json.dumps([memo_key(step), self.task_digest_before, dev.kind, dev.interpreter,
                           sorted(dev.versions.items())], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:40]

    def _cached(self, step: Step) -> CallOutcome | None:
        key = self.result_cache_key(step)
        if key is None:
            return None
        raw = kwscache.get("steps", key)  # None: absent, or its bytes changed on disk
        if raw is None:
            return None
        try:
            doc = decode_doc(json.loads(raw))
            extra = decode_extra(doc.kind, doc.extra)
        except ValueError:  # written by another kws version: a miss
            return None
        if doc.kind != kind_of(step):
            return None
        return CallOutcome(step, _WireStep.from_doc(0, doc, [], {}, extra))

    def _keep(self, step: Step, out: CallOutcome) -> None:
        key = self.result_cache_key(step)
        st = out.step
        if key is None or st is None or not st.ok or st.verified != [] or st.outputs or st.arrays:
            return
        doc = StepDoc(ok=st.ok, kind=st.kind, error=st.error,
                      extra=st.extra if isinstance(st.extra, dict) else encodable(st.extra),
                      seconds=st.seconds, cpu_s=st.cpu_s)
        try:
            raw = json.dumps(encodable(doc)).encode()
        except (TypeError, ValueError):  # not JSON-able: nothing kept
            return
        kwscache.put("steps", key, raw)  # False on a full or read-only cache folder: nothing kept

    def calls(self, steps: Sequence[Step], *, memo: bool = False) -> list[CallOutcome]:
        """Run ``steps``; with ``memo`` the results are shared with every other check
        that asks for an equal step (:func:`~workstation.protocol.steps.memo_key`: same
        kind and fields, e.g. role, case, seed, transforms, monitors), and the steps of
        :data:`CACHED_STEPS` come from kws's own result cache when it has them
        (:meth:`result_cache_key`).

        Raises:
            NotJudged: a step was stopped by a limit that says nothing about the task code
                (:meth:`run_steps`).
        """
        if not memo:
            return self.run_steps(steps)
        keys = [("call", memo_key(s)) for s in steps]
        futs, mine = self.stash.claim(keys)
        if mine:
            hits = {i: self._cached(steps[i]) for i in mine}
            for i, o in hits.items():
                if o is not None:
                    futs[i].set_result(o)
            mine = [i for i in mine if hits[i] is None]
        if mine:
            try:
                got = self._run_steps([steps[i] for i in mine], None, False)
                for i, o in zip(mine, got, strict=True):
                    self._keep(steps[i], o)
                for i, o in zip(mine, got, strict=True):
                    futs[i].set_result(o)
            except BaseException as e:
                self.stash.fail([keys[i] for i in mine], [futs[i] for i in mine], e)
                raise
        out = [f.result() for f in futs]
        for o in out:
            self._note(o)
        self._raise_unjudged(out)
        return out

    @staticmethod
    def call_step(role: str, case: dict[str, Any], seed: int, **kw: Any) -> CallStep:
        """A :class:`~workstation.protocol.steps.CallStep`; ``kw`` are its other fields
        (``transforms``, ``monitors``, ``repeat``, ``send_inputs``).

        Raises:
            TypeError: a keyword that is not a field of the step.
        """
        # callers pass a role name as str; msgspec checks it against Role when the job is encoded
        return CallStep(role=cast(Role, role), case=dict(case), seed=int(seed), **kw)

    def reference(self, pairs: list[tuple[dict[str, Any], int]], **kw: Any) -> list[CallOutcome]:
        """The reference's outcomes for (case, seed) pairs, memoised.

        Raises:
            TaskProblem: on a declared case with its inputs as ``make_inputs`` returns them
                (no transforms or monitors in ``kw``), ``make_inputs`` failed, the reference
                raised, or it returned non-finite values the contract forbids
                (:meth:`_reference_problem`).
            NotJudged: a library the reference's files import is not installed here.
        """
        outs = self.calls([self.call_step("reference", c, s, **kw) for c, s in pairs], memo=True)
        if not kw.get("transforms") and not kw.get("monitors"):
            self._reference_problem(pairs, outs)
        return outs

    def candidate(self, pairs: list[tuple[dict[str, Any], int]], **kw: Any) -> list[CallOutcome]:
        """The candidate's outcomes for (case, seed) pairs, memoised."""
        return self.calls([self.call_step("candidate", c, s, **kw) for c, s in pairs], memo=True)

    def declared_pairs(self) -> list[tuple[dict[str, Any], int]]:
        """Every declared case with every seed."""
        return [(c, s) for c in self.cases for s in self.seeds]

    def compare(self, ref: CallOutcome, cand: CallOutcome, case: dict[str, Any],
                tol: ResolvedTolerance | None = None) -> list[Comparison]:
        """Compare every output of two successful calls at the task's tolerance (or
        ``tol``); a different number of outputs is a mismatch on the missing ones."""
        out: list[Comparison] = []
        r, c = ref.outputs, cand.outputs
        for j in range(max(len(r), len(c))):
            if j >= len(r) or j >= len(c):
                dtype = (r[j] if j < len(r) else c[j]).dtype
                out.append(Comparison(ok=False, reason=f"the reference returns {len(r)} outputs, the candidate {len(c)}",
                                      shape=(), dtype=dtype))
                continue
            e, g = r[j], c[j]
            t = tol or self.tolerance(case, e.dtype)
            out.append(compare(e.values, g.values, t, expected_dtype=e.dtype, got_dtype=g.dtype,
                               nonfinite_ok=self.task.contract.nonfinite_inputs))
        return out


