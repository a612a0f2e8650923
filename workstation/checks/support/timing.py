"""kws's own measurement, shared by ``benchmark-bias`` and ``speedup-claim`` (parent side).

Plans which sides to time (the candidate, the baseline or else the reference, and a
``torch.compile`` of that side when it is PyTorch code), runs the ``timing`` harness step
(:mod:`workstation.harness.timing`) as an *exclusive* job (nothing else runs meanwhile),
memoises the result per engine run, and turns the raw samples into the timing panel's
evidence (:func:`Measurement.evidence`) with :mod:`workstation.analysis.timingstats`.

Where the Triton interpreter would run a side (the CPU, a Triton candidate or baseline),
timings say nothing about GPU speed: :func:`plan` marks the plan not representative and
the checks do not time (the benchmark cases of a GPU kernel do not even finish in the
interpreter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import msgspec

from workstation import settings
from workstation.analysis.roofline import Bound, bound
from workstation.analysis.timingstats import CI_LEVEL, RatioCI, SideStats, ratio_ci, summarize
from workstation.checks.support.static import source_kind
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.timing import TimedCase, TimingExtra
from workstation.protocol.results import Raised
from workstation.protocol.steps import Role, TimingSide, TimingStep

PROTOCOL = ("kws timing v1: {clock}; cache flushed before each cold sample ({flush}); "
            "warm-up excluded; sides interleaved per round; stop at stdrel < {target:.1%} "
            "(min {min_samples} samples) or {cap:g} s; median, IQR, bootstrap CI of the ratio")


def compile_timeout_s() -> float:
    """Time box (s) of a torch.compile first call: the ``compile_timeout`` setting
    (``KWS_COMPILE_TIMEOUT``), default 90."""
    return settings.current().compile_timeout


def torch_compile_enabled() -> bool:
    """The ``torch_compile`` setting: ``KWS_TORCH_COMPILE=0`` leaves the torch.compile
    baseline out (reported as such)."""
    return settings.current().torch_compile


def cache_bytes_override() -> int | None:
    """``KWS_LLC_BYTES``: the cache size the flush must evict, instead of the one the
    child reads (sysfs, the GPU's L2): for machines whose sysfs misreports it (the
    ``llc_bytes`` setting, bytes; ``None`` when unset)."""
    return settings.current().llc_bytes


def _product(case: dict[str, Any]) -> int:
    p = 1
    for k, v in case.items():
        if k != "dtype" and isinstance(v, int) and not isinstance(v, bool):
            p *= max(1, v)
    return p


def largest_case(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The declared case with the largest product of integer parameters."""
    return max(cases, key=_product)


@dataclass
class Plan:
    """What kws times for a task.

    ``cases``: the ``[benchmark]`` cases (else the largest declared case; ``--case`` when
    given); ``baseline_role``: ``"baseline"`` or, without one, ``"reference"``;
    ``over_pytorch``: that side is PyTorch code, so a ``torch.compile`` side is timed
    too (unless ``compile_enabled`` is False: ``KWS_TORCH_COMPILE=0``);
    ``representative``/``reason``: False where a side would run in the Triton
    interpreter.
    """

    cases: list[dict[str, Any]]
    case_source: str
    baseline_role: Role
    over_pytorch: bool
    kinds: dict[str, str]
    representative: bool
    reason: str
    fallback_case: dict[str, Any] | None = None
    compile_enabled: bool = True

    def sides(self) -> list[TimingSide]:
        s = [TimingSide(name="baseline", role=self.baseline_role), TimingSide(name="candidate", role="candidate")]
        if self.over_pytorch and self.compile_enabled:
            s.append(TimingSide(name="torch_compile", role=self.baseline_role, compile=True))
        return s


def plan(ctx: CheckContext) -> Plan:
    """The timing plan for ``ctx``'s task (see :class:`Plan`)."""
    task = ctx.task
    role: Role = "baseline" if "baseline" in task.entry else "reference"
    if ctx.case_filter:
        cases, src = [dict(ctx.case_filter)], "--case"
    elif task.benchmark_cases:
        cases, src = [dict(c) for c in task.benchmark_cases], "[benchmark] cases"
    else:
        cases, src = [largest_case(task.cases)], "the largest declared case (no [benchmark] cases)"
    kinds: dict[str, str] = {"candidate": source_kind(task, "candidate"), role: source_kind(task, role)}
    interp = [r for r, k in kinds.items() if k == "triton"] if ctx.device.interpreter else []
    reason = ""
    if interp:
        who = " and ".join(f"the {r}" for r in interp)
        reason = (f"{who} {'is' if len(interp) == 1 else 'are'} Triton code, run here by the Triton interpreter "
                  "(Python/numpy emulation on the CPU): its timings say nothing about GPU speed")
    if task.backend == "cuda" and not ctx.on_gpu:
        interp = interp or ["candidate"]
        reason = ("the candidate is a CUDA kernel and this machine has no GPU: there is nothing to time (under kws's CPU "
                  "emulation of CUDA its kernels run as host code, whose timings say nothing about GPU speed)")
    fallback = largest_case(task.cases) if src == "[benchmark] cases" else None
    return Plan(cases=cases, case_source=src, baseline_role=role, over_pytorch=kinds[role] == "pytorch",
                kinds=kinds, representative=not interp, reason=reason, fallback_case=fallback,
                compile_enabled=torch_compile_enabled())


@dataclass
class CaseTiming:
    """kws's measurement of one case: the ``timing`` step's record of it (``raw``), per side
    :class:`SideStats` (``sides``) and raw cold/warm samples in ms, the ratio intervals
    baseline/candidate (``ratio``: the primary condition, cold on CUDA and warm on the CPU;
    ``cold_ratio``, ``warm_ratio``), the ``torch.compile``/candidate ratio, errors, the stop
    reason, and the roofline :class:`Bound` of the case's bytes and flops."""

    case: dict[str, Any]
    raw: TimedCase
    primary: str = "cold"
    sides: dict[str, SideStats] = field(default_factory=dict)
    cold: dict[str, list[float]] = field(default_factory=dict)
    warm: dict[str, list[float]] = field(default_factory=dict)
    ratio: RatioCI | None = None
    cold_ratio: RatioCI | None = None
    warm_ratio: RatioCI | None = None
    compile_ratio: RatioCI | None = None
    errors: dict[str, Raised] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)
    interpreted: list[str] = field(default_factory=list)
    bound: Bound | None = None

    @property
    def ok(self) -> bool:
        return self.ratio is not None

    def errors_evidence(self) -> dict[str, Any]:
        """The sides' errors as a finding's evidence holds them (side -> the error's fields)."""
        return {k: msgspec.to_builtins(v) for k, v in self.errors.items()}


@dataclass
class Measurement:
    """kws's measurement of a task: the plan, the device, the ``timing`` step's payload
    (``info``; its ``cases`` are in :attr:`cases`), one :class:`CaseTiming` per case."""

    plan: Plan
    device: str
    device_name: str
    info: TimingExtra
    cases: list[CaseTiming]
    note: str = ""

    def protocol_text(self) -> str:
        c = self.cases[0].raw.params if self.cases else {}
        clock = ("CUDA events on the current stream + torch.cuda.synchronize()" if self.info.device == "cuda"
                 else "time.perf_counter_ns (synchronous CPU calls)")
        flush = f"{self.info.flush_bytes / 2**20:.0f} MiB written, 2 x the {self.cache_text()}"
        return PROTOCOL.format(clock=clock, flush=flush, target=c.get("target_stdrel", 0.0),
                               min_samples=c.get("min_samples", 0), cap=c.get("time_cap_s", 0.0))

    def cache_text(self) -> str:
        cache = self.info.cache
        lvl = cache.level
        name = f"L{lvl}" if lvl else "last-level cache"
        return f"{name} of {cache.bytes / 2**20:.1f} MiB ({cache.source})"

    def device_text(self) -> str:
        if self.info.device == "cuda":
            return f"cuda ({self.device_name})"
        model = self.info.cpu_model or "cpu"
        return f"cpu ({model}, {self.info.torch_threads} thread(s))"

    def evidence(self, ct: CaseTiming, claimed: float) -> dict[str, Any]:
        """The timing panel's evidence for one case (``evidence["timing"]``)."""
        sides = {name: st.evidence() for name, st in ct.sides.items()}
        rep = self.plan.representative and not ct.interpreted
        reason = self.plan.reason
        if ct.interpreted:
            reason = (f"{', '.join(ct.interpreted)} launched Triton kernels in the interpreter: "
                      "the timings say nothing about GPU speed")
        doc: dict[str, Any] = {
            "device": self.device_text(),
            "protocol": self.protocol_text(),
            "representative": rep,
            "reason": reason,
            "sides": sides,
            "ratio": ct.ratio.ratio if ct.ratio else math.nan,
            "ratio_ci": ct.ratio.as_list() if ct.ratio else [math.nan, math.nan],
            "ci_level": CI_LEVEL,
            "claimed": claimed,
            "case": ct.case,
            "baseline_role": self.plan.baseline_role,
            "stop": ct.raw.stop,
            "rounds": ct.raw.rounds,
        }
        if ct.ratio:
            doc["ci_method"] = ct.ratio.method
        doc["primary"] = ct.primary
        for name, r in (("cold", ct.cold_ratio), ("warm", ct.warm_ratio)):
            if r:
                doc[f"{name}_ratio"] = r.ratio
                doc[f"{name}_ratio_ci"] = r.as_list()
        if ct.compile_ratio:
            doc["torch_compile_ratio"] = ct.compile_ratio.ratio
            doc["torch_compile_ratio_ci"] = ct.compile_ratio.as_list()
        if ct.errors:
            doc["errors"] = {k: {"type": v.type, "message": v.message, "phase": v.phase} for k, v in ct.errors.items()}
        if ct.stopped:
            doc["stopped"] = ct.stopped
        busy = self.descheduled(ct)
        if busy:
            doc["descheduled_fraction"] = busy
        return doc

    @staticmethod
    def descheduled(ct: CaseTiming) -> dict[str, float]:
        """Per side, the fraction of CPU samples during which the process was descheduled
        (wall time well above its CPU time: the machine was busy with other work)."""
        out = {}
        for name, sd in ct.raw.sides.items():
            n = len(sd.cold_ns) + len(sd.warm_ns)
            if n and sd.descheduled:
                out[name] = sd.descheduled / n
        return out


def measure(ctx: CheckContext) -> Measurement:
    """kws's measurement of the task (memoised per engine run: ``benchmark-bias`` and
    ``speedup-claim`` share one). Runs the ``timing`` step in an exclusive job; a case
    whose calls are too slow to time (``max_call_s``) is replaced by the largest declared
    case.

    Raises:
        ValueError: the plan is not representative (callers check :func:`plan` first).
        RuntimeError: the timing child died (its death is in the message).
    """
    return ctx.stash.once(Measurement, lambda: _measure(ctx, plan(ctx)))


def _run_timing(ctx: CheckContext, p: Plan, cases: list[dict[str, Any]]) -> TimingExtra:
    spec = TimingStep(cases=cases, seed=ctx.seeds[0] if ctx.seeds else 0, sides=p.sides(),
                      compile_timeout_s=compile_timeout_s(), stop_if_interpreted=True, workload=True,
                      bandwidth=True, cache_bytes=cache_bytes_override())
    budget = 60.0 + compile_timeout_s() * (p.over_pytorch and p.compile_enabled) + 20.0 * len(cases)
    job = ctx.run_job([spec], exclusive=True, step_timeout=budget)
    st = job.steps[0] if job.steps else None
    if st is None:
        raise RuntimeError(f"the timing child {job.describe_death()}: {job.stderr_tail[-1500:]}")
    if not st.ok:
        raise RuntimeError(f"the timing step failed: {st.error.message if st.error is not None else None}")
    return extra_as(st.extra, TimingExtra)


def _measure(ctx: CheckContext, p: Plan) -> Measurement:
    if not p.representative:
        raise ValueError(p.reason)
    extra = _run_timing(ctx, p, p.cases)
    note = ""
    too_slow = [c for c in extra.cases if any(s.stopped.startswith("one call takes") for s in c.sides.values())]
    if too_slow and p.fallback_case is not None and p.fallback_case not in p.cases:
        labels = ", ".join(case_label(c.case) for c in too_slow)
        note = (f"the [benchmark] case(s) {labels} are too slow to time here (one call > "
                f"{too_slow[0].params['max_call_s']:g} s); timed the largest declared case instead")
        extra = _run_timing(ctx, p, [p.fallback_case])
        p.cases, p.case_source = [p.fallback_case], "the largest declared case (the [benchmark] case is too slow here)"
    cases = [_case_timing(ctx, extra, raw) for raw in extra.cases]
    return Measurement(plan=p, device=extra.device, device_name=extra.device_name, info=extra, cases=cases, note=note)


def _case_timing(ctx: CheckContext, extra: TimingExtra, raw: TimedCase) -> CaseTiming:
    primary = "cold" if extra.device == "cuda" else "warm"
    ct = CaseTiming(case=dict(raw.case), raw=raw, errors=dict(raw.errors), primary=primary)
    for name, sd in raw.sides.items():
        if sd.stopped:
            ct.stopped[name] = sd.stopped
        if sd.interpreter_launches:
            ct.interpreted.append(name)
        if len(sd.cold_ns) >= 2:
            ct.sides[name] = summarize(sd.cold_ns, sd.warm_ns, sd.first_call_ns, primary=primary)
            ct.cold[name] = [x / 1e6 for x in sd.cold_ns]
            ct.warm[name] = [x / 1e6 for x in sd.warm_ns]
        elif sd.first_call_ns is not None:
            ct.sides[name] = summarize([], [], sd.first_call_ns, primary=primary)
    b, c = ct.cold.get("baseline"), ct.cold.get("candidate")
    if b and c:
        ct.cold_ratio = ratio_ci(b, c)
    bw, cw = ct.warm.get("baseline"), ct.warm.get("candidate")
    if bw and cw and len(bw) >= 2 and len(cw) >= 2:
        ct.warm_ratio = ratio_ci(bw, cw)
    ct.ratio = ct.cold_ratio if primary == "cold" else ct.warm_ratio or ct.cold_ratio
    tc = ct.warm.get("torch_compile") if primary == "warm" else ct.cold.get("torch_compile")
    cc = ct.warm.get("candidate") if primary == "warm" else c
    if tc and cc and len(tc) >= 2 and len(cc) >= 2:
        ct.compile_ratio = ratio_ci(tc, cc)
    wl = raw.workload
    if wl:
        ct.bound = bound(device=extra.device, device_name=extra.device_name,
                         dtype=str(ct.case.get("dtype", "")), read_bytes=wl.read_bytes,
                         write_bytes=wl.write_bytes, flops=wl.flops, cache_bytes=extra.cache.bytes,
                         measured_bandwidth=extra.bandwidth.bytes_per_s if extra.bandwidth is not None else None)
    return ct
