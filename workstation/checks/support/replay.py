"""The battery's candidate calls replayed on another role (the baseline), for the checks of
task kinds that compare a candidate with the code before the change or with the source of a
translation (``fix-vs-baseline``, ``source-parity``, ``no-regression``).

"The cases the battery runs" are the ``call`` steps every other check of the run executed
(:meth:`~workstation.engine.context.CheckContext.call_log`): the declared cases and seeds,
the derived shapes of ``edge-shapes`` (run under the ``PoisonMaskedLoads`` monitor), the
layouts of ``noncontiguous``, the value variants of ``special-values``, the dtype and
long-reduction runs of the numerics audit. :func:`battery_calls` takes each distinct
candidate step that ran (not one skipped after an earlier hang, nor one cut at a budget of
kws's own, nor one that failed on a limit of kws's interpreter: :func:`interpreter_limit`) with ``repeat = 1`` and no monitor that changes what it computes
(:data:`REPLAYED_MONITORS`), whose reference step (the same case, seed and transforms, no
monitors) ran too, and classifies it against the reference with the battery's own rule
(:func:`~.trials.classify`). **Every failing call** (mismatch, non-finite, raised, crashed,
timed out) is replayed, whatever their number; then the passing ones in order of priority
(declared cases, derived shapes, transformed inputs) up to a cap. :func:`replay` reruns
each with the role replaced (memoised, so two checks share the runs; the exposing monitors
kept, so the other role runs under the same conditions) and classifies both roles. The
declared cases are always included (run here when no other check ran them, e.g. with
``--only``).

:func:`require_baseline` is the precondition those checks (and ``fusion-accuracy``) share: a
runnable ``entry.baseline``; :func:`replayed_evidence` is the evidence of one replayed call.

Same imports as the checks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from workstation.checks.support.trials import Trial, TrialResult, classify, evidence_of
from workstation.engine.check import NotJudged, Skip
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.steps import (
    AtenOps,
    CallStep,
    Layout,
    NumCallers,
    PallasCalls,
    PallasStrict,
    PoisonMaskedLoads,
    Transform,
    TritonLaunches,
    TritonLaunchRecords,
    ValueTransform,
    kind_of,
    memo_key,
)

#: most replayed *passing* steps on the CPU (interpreter) and on a GPU; failing ones are all
#: replayed.
CPU_MAX_STEPS = 40
GPU_MAX_STEPS = 160
#: monitors that only observe a call (dropped in the replay: they change nothing it computes).
OBSERVING_MONITORS = (AtenOps, TritonLaunches, TritonLaunchRecords, NumCallers, PallasCalls)
#: monitors that expose a defect (undefined lanes read poison, strict Pallas interpretation):
#: kept in the replay, so the other role runs under the same conditions.
EXPOSING_MONITORS = (PoisonMaskedLoads, PallasStrict)
#: a candidate step with only these monitors is replayed (``KeepFloat64`` changes the
#: computation: such a step is not a battery call of the candidate's own).
REPLAYED_MONITORS = OBSERVING_MONITORS + EXPOSING_MONITORS
#: the strict Pallas interpreter's own detector messages (JAX's ``interpret_pallas_call`` and
#: ``shared_memory``: "Out-of-bounds read of ...", "... is entirely out of bounds for shape"):
#: the one failure under ``PallasStrict`` that is the candidate's.
STRICT_OOB = re.compile(r"out[- ]of[- ]bounds", re.IGNORECASE)


def interpreter_limit(step: CallStep, out: CallOutcome) -> str:
    """Why the failure of candidate ``step`` is a limit of kws's interpreter rather than the
    candidate's ("" when it is not): a call under the strict Pallas interpreter
    (``PallasStrict``) that failed with anything but that interpreter's out-of-bounds
    detector (the TPU interpreter cannot run masked ``plgpu.load``s, advanced indexing or
    other GPU-only ops: JAX's own ``pallas.ops.gpu`` kernels). Such a call is not judged,
    never a failure of the candidate (``pallas-kernel`` names it)."""
    if out.ok or not ran(out) or not any(isinstance(m, PallasStrict) for m in step.monitors):
        return ""
    msg = (out.error.message if out.error is not None else "") if out.step is not None else out.death
    if STRICT_OOB.search(msg or ""):
        return ""
    return f"kws's strict Pallas interpreter could not run it ({out.failure_text()[:200]})"


@dataclass(eq=False)
class Replayed:
    """One battery call and its replay: ``label`` says what kind of input it was; ``cand``
    / ``other`` are the candidate's and the other role's results against the reference."""

    step: CallStep
    label: str
    ref: CallOutcome
    cand: TrialResult
    other: TrialResult
    other_out: CallOutcome

    @property
    def valued(self) -> bool:
        """True when the inputs' values were transformed (large magnitudes, subnormals, signed
        zeros...): there the declared tolerance may not scale, and ``special-values`` judges
        the candidate alone against a float64 oracle."""
        return any(isinstance(t, ValueTransform) for t in self.step.transforms)

    @property
    def case(self) -> dict[str, Any]:
        return dict(self.step.case)

    @property
    def seed(self) -> int:
        return int(self.step.seed)

    @property
    def other_ran(self) -> bool:
        """False when the other role's call was not run (skipped after an earlier hang, cut
        at a budget of kws's own): nothing to compare there."""
        return ran(self.other_out)

    def line(self) -> str:
        return f"case {case_label(self.case)} seed {self.seed} ({self.label})"


def outcome_class(r: TrialResult) -> str:
    """The contract's failure class of a classified result, or ``pass`` / ``dropped``:
    ``mismatch``, ``nan``, ``compile-error``, ``runtime-error``, ``crash``, ``timeout``."""
    if r.status in ("pass", "dropped"):
        return r.status
    if r.status == "nonfinite":
        return "nan"
    if r.status == "mismatch":
        return "mismatch"
    return (r.klass or "runtime-error").split(":")[0]


def _label(step: CallStep, declared: set[str]) -> tuple[int, str]:
    key = json.dumps(step.case, sort_keys=True)
    if not step.transforms:
        return (0, "declared case") if key in declared else (1, "derived shape")
    names = []
    for t in step.transforms:
        d = msgspec.to_builtins(t)
        extra = d.get("kind") or d.get("mode") or d.get("dist") or d.get("dtype") or ""
        names.append(f"{kind_of(t)}{':' + str(extra) if extra else ''}")
    return 2, "inputs: " + ", ".join(names)


def _reference_step(s: CallStep) -> CallStep:
    """The reference step the battery pairs with candidate step ``s``: the same step without
    monitors, but a layout transform (same values in another memory layout) is the
    reference's only for ``expand`` (materialised), as ``noncontiguous`` runs it."""
    ts: list[Transform] = []
    for t in s.transforms:
        if isinstance(t, Layout):
            if t.kind == "expand":
                ts.append(msgspec.structs.replace(t, materialize=True))
            continue
        ts.append(t)
    return msgspec.structs.replace(s, role="reference", transforms=ts, monitors=[])


def reference_step(s: CallStep) -> CallStep:
    """The reference step the battery pairs with candidate step ``s`` (public name of
    :func:`_reference_step`)."""
    return _reference_step(s)


def replay_step(s: CallStep, role: str) -> CallStep:
    """Candidate step ``s`` for ``role``: the same inputs, the exposing monitors kept, the
    observing ones dropped."""
    return msgspec.structs.replace(s, role=role, monitors=[m for m in s.monitors if isinstance(m, EXPOSING_MONITORS)])


def ran(o: CallOutcome) -> bool:
    """False for a call that was not run (skipped after an earlier hang of its principal)
    or was cut at a budget of kws's own: it observed nothing."""
    return not (o.step is None and (o.death_status == "skipped" or o.budget))


def battery_calls(ctx: CheckContext, limit: int | None = None) -> list[tuple[CallStep, str, CallOutcome, CallOutcome]]:
    """(candidate step, label, candidate outcome, reference outcome) for the distinct
    candidate calls of the run that ran (module doc): every failing one first (declared
    cases, derived shapes, transformed inputs, in that order), then the passing ones in the
    same order, at most ``limit`` of those (default :data:`CPU_MAX_STEPS` /
    :data:`GPU_MAX_STEPS`)."""
    pairs = ctx.declared_pairs()
    ctx.reference(pairs)
    ctx.candidate(pairs)
    declared = {json.dumps(c, sort_keys=True) for c in ctx.cases}
    log = ctx.call_log()
    by_key = {memo_key(s): o for s, o in log if ran(o)}
    seen: set[str] = set()
    drop = not ctx.task.contract.nonfinite_inputs
    found: list[tuple[int, int, CallStep, str, CallOutcome, CallOutcome, bool]] = []
    for n, (s, o) in enumerate(log):
        if s.role != "candidate" or s.repeat != 1 or not ran(o) \
                or not all(isinstance(m, REPLAYED_MONITORS) for m in s.monitors) or interpreter_limit(s, o):
            continue
        k = memo_key(s)
        if k in seen:
            continue
        seen.add(k)
        ref = by_key.get(memo_key(_reference_step(s)))
        if ref is None:
            continue
        prio, label = _label(s, declared)
        t = Trial(dict(s.case), int(s.seed), label, list(_reference_step(s).transforms), list(s.transforms))
        found.append((prio, n, s, label, o, ref, classify(ctx, t, ref, o, drop).failed))
    found.sort(key=lambda t: (not t[6], t[0], t[1]))
    cap = limit if limit is not None else (GPU_MAX_STEPS if ctx.on_gpu else CPU_MAX_STEPS)
    failing = [f for f in found if f[6]]
    passing = [f for f in found if not f[6]][:cap]
    return [(s, label, o, ref) for _, _, s, label, o, ref, _ in failing + passing]


def interpreter_limited(ctx: CheckContext) -> list[tuple[CallStep, str]]:
    """The battery's candidate calls left out of the replay because kws's interpreter could
    not run them (:func:`interpreter_limit`), each with the reason."""
    out, seen = [], set()
    for s, o in ctx.call_log():
        why = interpreter_limit(s, o) if s.role == "candidate" else ""
        if why and memo_key(s) not in seen:
            seen.add(memo_key(s))
            out.append((s, why))
    return out


def replay(ctx: CheckContext, role: str, extra: list[tuple[CallStep, str]] | None = None,
           limit: int | None = None) -> list[Replayed]:
    """The battery's candidate calls (plus ``extra`` candidate steps with labels, run here
    for both roles and the reference) replayed on ``role``, each classified against the
    reference. Each :class:`Replayed` says whether the other role's call ran
    (:attr:`Replayed.other_ran`): one skipped after an earlier hang observed nothing.

    Raises:
        NotJudged: ``role``'s code cannot run here (from the context).
    """
    calls = battery_calls(ctx, limit)
    if extra:
        have = {memo_key(s) for s, *_ in calls}
        new = [(s, lab) for s, lab in extra if memo_key(s) not in have]
        if new:
            cand = ctx.calls([s for s, _ in new], memo=True)
            refs = ctx.calls([_reference_step(s) for s, _ in new], memo=True)
            calls += [(s, lab, c, r) for (s, lab), c, r in zip(new, cand, refs, strict=True)]
    others = ctx.calls([replay_step(s, role) for s, *_ in calls], memo=True)
    out = []
    for (s, label, c, r), o in zip(calls, others, strict=True):
        t = Trial(dict(s.case), int(s.seed), label, list(_reference_step(s).transforms), list(s.transforms))
        drop = not ctx.task.contract.nonfinite_inputs
        out.append(Replayed(s, label, r, classify(ctx, t, r, c, drop), classify(ctx, t, r, o, drop), o))
    return out


def counts(items: list[Replayed]) -> dict[str, int]:
    """How many replayed calls each (candidate, other) outcome pair has."""
    out: dict[str, int] = {}
    for it in items:
        k = f"candidate {outcome_class(it.cand)} / other {outcome_class(it.other)}"
        out[k] = out.get(k, 0) + 1
    return out


def replayed_evidence(it: Replayed) -> dict[str, Any]:
    """The evidence of one replayed call: its case, seed and input, and both roles' classes and evidence."""
    return {"case": it.case, "seed": it.seed, "input": it.label,
            "baseline": {"class": outcome_class(it.other), **evidence_of(it.other)},
            "candidate": {"class": outcome_class(it.cand), **evidence_of(it.cand)}}


def require_baseline(ctx: CheckContext, missing: str, who: str = "the baseline", where: str = "") -> None:
    """None when ``entry.baseline`` exists and can run here.

    Raises:
        Skip: the task has no ``entry.baseline`` (``missing`` says why that matters).
        NotJudged: the baseline's backend cannot run here (``who (backend where) cannot run here: why``).
    """
    if "baseline" not in ctx.task.entry:
        raise Skip(missing)
    why = ctx.cannot_run("baseline")
    if why:
        raise NotJudged(f"{who} ({ctx.backend_of('baseline')}{where}) cannot run here: {why}")
