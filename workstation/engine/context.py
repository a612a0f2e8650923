"""What a check may use while it runs: :class:`CheckContext` and :class:`CallOutcome`.

A check never runs task code itself: it asks its context to run harness steps (the typed
Structs of :mod:`workstation.protocol.steps`) in isolated children
(:class:`~workstation.runner.sandbox.Runner`) and gets back :class:`CallOutcome` data,
which it compares here in the parent (:mod:`workstation.analysis.compare`).
"""

from __future__ import annotations

import json
import os
import shlex
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from workstation.analysis.compare import Comparison, ResolvedTolerance, compare, resolve_tolerance
from workstation.engine.check import Skip
from workstation.protocol.steps import CallStep, Step, memo_key, step_roles
from workstation.runner import JobResult, Runner, StepResult
from workstation.task.backends import cannot_run, role_backend
from workstation.task.model import Task
from workstation.task.sources import TaskSources

DEFAULT_SEEDS = (0, 1, 2)
#: the dtypes the Triton interpreter stores as raw bits (kws's fidelity layer emulates them).
EMULATED_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
Event = Callable[[str, dict[str, Any]], None]


def step_timeout_s() -> float:
    """Per-step wall-clock limit (s): ``KWS_STEP_TIMEOUT``, default 30."""
    return float(os.environ.get("KWS_STEP_TIMEOUT", "30"))


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
    ``"timeout"``, ``"signal"`` or ``"exit"``.
    """

    spec: Step
    step: StepResult | None
    death: str = ""
    death_status: str = ""
    signal_name: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.step is not None and self.step.ok

    @property
    def outputs(self):
        return self.step.outputs if self.step is not None else []

    @property
    def error(self) -> dict[str, Any] | None:
        return self.step.error if self.step is not None else None

    def failure_class(self) -> str | None:
        """The contract's failure class of this call, or None when it returned:
        ``compile-error`` (Triton or an extension build rejected it), ``runtime-error``
        (it raised), ``crash`` (the process died), ``timeout``."""
        if self.step is None:
            return "timeout" if self.death_status == "timeout" else "crash"
        if self.step.ok:
            return None
        origin = (self.step.error or {}).get("origin")
        return "compile-error" if origin in ("triton-compile", "build") else "runtime-error"

    def failure_evidence(self) -> dict[str, Any]:
        """Evidence for a call that did not return: the exception or the death."""
        if self.step is None:
            ev: dict[str, Any] = {"death": self.death, "status": self.death_status}
            if self.signal_name:
                ev["signal"] = self.signal_name
            if self.stderr_tail:
                ev["stderr_tail"] = self.stderr_tail[-2000:]
            if self.stdout_bytes > 65536:
                ev["stdout_bytes"] = self.stdout_bytes
            return ev
        err = dict(self.step.error or {})
        tb = err.pop("traceback", "")
        err["traceback_tail"] = "\n".join(tb.strip().splitlines()[-12:])
        return err

    def failure_text(self) -> str:
        """One line: ``raised ValueError: ...`` / ``the process died from SIGABRT``."""
        if self.step is None:
            return self.death
        err = self.step.error or {}
        where = err.get("where") or {}
        loc = f" ({where.get('file')}:{where.get('line')})" if where else ""
        msg = (err.get("message") or "").strip().splitlines()
        return f"raised {err.get('type')}: {msg[0][:200] if msg else ''}{loc}"


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

    def extend_report(self, key: str, part: str, value: Any) -> None:
        """Put ``value`` under ``report[key][part]`` of the run's JSON report (a kws
        extension key beside the contract's; e.g. ``profile.self``). Thread-safe: checks
        running in parallel may fill parts of one key."""
        with self._ext_lock:
            self.extensions.setdefault(key, {})[part] = value

        self._call_log: list[tuple[CallStep, CallOutcome]] = []
        self._log_lock = threading.Lock()

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
        """The backend ``role``'s code is written in (:func:`~workstation.task.backends.role_backend`)."""
        return self.stash.once(("backend_of", role), lambda: role_backend(self.task, role, self.sources))

    def cannot_run(self, role: str) -> str | None:
        """Why ``role``'s code cannot run on this device (a CUDA extension without a GPU, a
        Pallas kernel without JAX, an NKI kernel without a simulator), or ``None``."""
        d = self.runner.device
        return cannot_run(self.backend_of(role), d.kind, d.versions)

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

    def interpreter_fidelity(self) -> dict[str, Any]:
        """The interpreter fidelity self-test of this run (one ``interpreter_selftest``
        step, memoised): ``extra`` of :class:`~workstation.protocol.steps.InterpreterSelftestStep`."""
        def run() -> dict[str, Any]:
            from workstation.protocol.steps import InterpreterSelftestStep

            out = self.run_steps([InterpreterSelftestStep()])[0]
            if not out.ok or out.step is None:
                return {"error": out.failure_text()}
            return dict(out.step.extra)

        return self.stash.once("interpreter_fidelity", run)

    def unjudged_reason(self, dtype: str) -> str | None:
        """Why kws cannot judge a Triton candidate's ``dtype`` on this device (None: it
        can): only under the interpreter, only for the dtypes it stores as raw bits
        (:data:`EMULATED_DTYPES`), and only when the self-test fails for that dtype."""
        if dtype not in EMULATED_DTYPES or self.task.backend != "triton" or self.runner is None or self.on_gpu:
            return None
        st = self.interpreter_fidelity()
        if "error" in st:
            return f"the interpreter self-test could not run ({str(st['error'])[:200]})"
        res = (st.get("selftest") or {}).get(dtype)
        if res is None:
            return f"the interpreter self-test does not cover {dtype}"
        if not res.get("ok"):
            bad = [k for k, v in (res.get("probes") or {}).items() if not v] or [res.get("error", "?")]
            return (f"the Triton interpreter does not compute {dtype} as compiled Triton does here "
                    f"(self-test probes failed: {', '.join(map(str, bad))})")
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
        """Run harness steps in one child (see :mod:`workstation.harness`).

        Raises:
            StepError: a step does not have its declared form.
            Skip: a step runs a role whose backend cannot run here (:meth:`cannot_run`):
                the check that asked is ``skip`` with the reason.
        """
        for s in steps:
            for role in sorted(step_roles(s)):
                why = self.cannot_run(role)
                if why:
                    raise Skip(f"the {role} ({self.backend_of(role)}) cannot run here: {why}")
        st = step_timeout or step_timeout_s()
        t = self.task
        return self.runner.run(t.dir, steps, timeout=60 + st * len(steps) * 1.5, exclusive=exclusive,
                               entry={k: str(v) for k, v in t.entry.items()}, out_args=list(t.out_args),
                               inout_args=list(t.inout_args), step_timeout=st,
                               helper_dirs=[str(h) for h in t.helper_dirs])

    def run_steps(self, steps: list[Step], *, step_timeout: float | None = None) -> list[CallOutcome]:
        """Run steps in as few children as possible: when a child dies in step k, step k
        becomes a death outcome and the remaining steps continue in a fresh child."""
        outcomes: list[CallOutcome | None] = [None] * len(steps)
        start = 0
        while start < len(steps):
            job = self.run_job(steps[start:], step_timeout=step_timeout)
            died = None
            for i, st in enumerate(job.steps):
                if st is not None:
                    outcomes[start + i] = CallOutcome(steps[start + i], st, stdout_tail=job.stdout_tail,
                                                      stderr_tail=job.stderr_tail, stdout_bytes=job.stdout_bytes)
                elif died is None:
                    died = i
            if died is None:
                break
            if not job.died:  # the child ended normally without writing a step: a kws bug
                why = "; ".join(job.wire_errors) or job.stderr_tail[-2000:]
                raise RuntimeError(f"harness wrote no readable result for step {start + died}: {why}")
            outcomes[start + died] = CallOutcome(
                steps[start + died], None, death=job.describe_death(), death_status=job.status,
                signal_name=job.signal_name, stdout_tail=job.stdout_tail, stderr_tail=job.stderr_tail,
                stdout_bytes=job.stdout_bytes)
            start += died + 1
        done = [o for o in outcomes if o is not None]
        with self._log_lock:
            self._call_log.extend((o.spec, o) for o in done if isinstance(o.spec, CallStep))
        self._task_format_problem(done)
        return done

    def _task_format_problem(self, outcomes: list[CallOutcome]) -> None:
        """Raise :class:`~workstation.engine.check.Skip` naming task.toml and the key when a
        job child found a task-format problem (harness ``TaskFormatError``): ``out_args``
        beyond the inputs (any case), or a declared case over the input budget. A derived
        case over the budget stays a failed ``make_inputs`` (kws drops such cases)."""
        from workstation.engine.check import Skip

        declared = [dict(c) for c in self.task.cases]
        for o in outcomes:
            err = o.error or {}
            if err.get("origin") != "task-format":
                continue
            key = str(err.get("key") or "")
            case = getattr(o.spec, "case", None)
            if key == "cases" and case is not None and dict(case) not in declared:
                continue
            raise Skip(f"the task is malformed: {self.task.dir / 'task.toml'}: {key}: {err.get('message')}")

    def calls(self, steps: list[Step], *, memo: bool = False) -> list[CallOutcome]:
        """Run ``steps``; with ``memo`` the results are shared with every other check
        that asks for an equal step (:func:`~workstation.protocol.steps.memo_key`: same
        kind and fields, e.g. role, case, seed, transforms, monitors)."""
        if not memo:
            return self.run_steps(steps)
        keys = [("call", memo_key(s)) for s in steps]
        futs, mine = self.stash.claim(keys)
        if mine:
            try:
                got = self.run_steps([steps[i] for i in mine])
                for i, o in zip(mine, got, strict=True):
                    futs[i].set_result(o)
            except BaseException as e:
                self.stash.fail([keys[i] for i in mine], [futs[i] for i in mine], e)
                raise
        return [f.result() for f in futs]

    @staticmethod
    def call_step(role: str, case: dict[str, Any], seed: int, **kw: Any) -> CallStep:
        """A :class:`~workstation.protocol.steps.CallStep`; ``kw`` are its other fields
        (``transforms``, ``monitors``, ``repeat``, ``send_inputs``).

        Raises:
            TypeError: a keyword that is not a field of the step.
        """
        return CallStep(role=role, case=dict(case), seed=int(seed), **kw)

    def reference(self, pairs: list[tuple[dict[str, Any], int]], **kw: Any) -> list[CallOutcome]:
        """The reference's outcomes for (case, seed) pairs, memoised."""
        return self.calls([self.call_step("reference", c, s, **kw) for c, s in pairs], memo=True)

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


