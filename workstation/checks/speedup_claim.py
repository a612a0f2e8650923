"""``speedup-claim``: the claimed speedup against kws's own measurement, and the roofline."""

from __future__ import annotations

import math
from typing import Any

from workstation.analysis.roofline import beats
from workstation.analysis.timingstats import CLAIM_MARGIN, judge_claim, noise, robustness
from workstation.checks.support.suspicion import suspect
from workstation.checks.support.timing import CaseTiming, Measurement, measure, plan
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label
from workstation.task.model import Task


def fmt_ci(lo: float, hi: float) -> str:
    return f"[{lo:.3g}, {hi:.3g}]"


@register
class SpeedupClaim(Check):
    """The measured speedup differs from the claim beyond the measurement noise, or is
    physically impossible.

    Catches:
        a claimed speedup (`[claims] speedup`, over the baseline or, without one,
        the reference) that kws's own measurement does not support, or that is physically
        impossible.

    How:
        the kws timing protocol (`docs/timing.md`): exclusive child, warm-up excluded,
        cache (L2 / LLC) flushed before each cold sample, sides interleaved, nvbench's stdrel
        stopping rule, on the `[benchmark]` cases (else the largest declared case). The ratio
        median(baseline) / median(candidate) gets a 95% bootstrap interval
        (`scipy.stats.bootstrap`, BCa, paired by round) for the primary condition (cold on CUDA,
        as do_bench and nvbench report; warm on the CPU, as torch.utils.benchmark reports) and
        the other one. Rule, with margin m = 10%: inside the primary
        interval, consistent (`info`); above it but inside the other condition's interval,
        `warn` (the speedup holds only with a cold, or a warm, cache); above by at most m,
        `warn`; above by more, `fail` **only when that holds robustly**
        (`analysis.timingstats.robustness`: each half of the samples, in the order taken, alone
        measures a ratio more than m below the claim, and 1.5x further below when the measurement
        is noisy: an interval more than 50% wide or more than 25% of the samples descheduled),
        else `warn` "inconclusive on this machine" with the reasons, so machine load cannot flip
        the verdict between fail and warn (tests inject quiet, loaded and drifting
        samples); below it, `info` (conservative) within 3x, else `warn`.
        Where the comparison side is PyTorch code, `torch.compile` of it is timed beside it
        (time-boxed; the report says when it could not be compiled) and the candidate's speedup
        over it is reported (`warn` when the compiled baseline is faster). Roofline: a measured
        cold time below the time needed to read the inputs at the device's bandwidth, or a
        claimed time (baseline / claim) below `max(bytes / bandwidth, flops / peak)`, is `fail`
        (datasheet peaks per GPU model; the measured copy bandwidth on the CPU). The claim's
        finding for each case carries `evidence["timing"]` for the timing panel (shape in
        `docs/timing.md`).

    Findings:
        | finding | severity |
        |---|---|
        | the claim is above the primary interval by more than m = 10%, robustly (each half of the samples alone measures a ratio more than m below the claim; 1.5x further below when the measurement is noisy) | `fail` |
        | a measured cold time below the time needed to read the inputs at the device's bandwidth, or a claimed time (baseline / claim) below `max(bytes / bandwidth, flops / peak)` (flops from `FlopCounterMode` on the reference): the measurement does not time the work, or the claim is impossible | `fail` |
        | the claim is above the primary interval by more than m but not robustly: "inconclusive on this machine", with the reasons | `warn` |
        | the claim is above the primary interval by at most m, or inside the other condition's interval only (the speedup holds only with a cold, or a warm, cache) | `warn` |
        | the claim is below the interval by more than 3x (understated: kws's timed calls ran far faster than the author's; a cache answering a timing loop is one way) | `warn`, not judged |
        | the candidate is slower than a `torch.compile` of a PyTorch comparison side | `warn` |
        | the claim is inside the primary interval, or below it within 3x (conservative); the compiled baseline's timing, or why it could not be compiled | `info` |

    Source:
        speedups reported from unfair or noisy benchmarks (Hoefler & Belli, "Scientific
        Benchmarking of Parallel Computing Systems", SC 2015: report medians and confidence
        intervals; NVIDIA nvbench's noise criterion).

    Limits:
        under the Triton interpreter (no GPU) a Triton candidate or baseline is not
        timed: `skip`, "not representative", and the claim is not judged. Torch-only tasks get
        real CPU timings, one intra-op thread. A claim made for a GPU can differ from a CPU
        measurement for good reasons; the evidence names the device. `skip` when the task
        claims no speedup.

    Not judged when:
        the claim is not representative on this device (`NotJudged`: CPU, interpreter), or
        one case ran interpreted: not judged for that case; a case kws could not time is a
        `warn`, not judged (never `pass`). A claim more than 3x below the measurement is a `warn`
        tagged `cache`, not judged: kws cannot tell a cache that answers repeated calls from a
        claim made elsewhere. A measurement too noisy to decide (its 95% interval more than
        50% wide, or more than 25% of a side's samples descheduled: `timingstats.noise`) is
        not judged for that case whether the claim falls inside the interval (a wide interval
        contains almost any claim) or above it but not robustly: a loaded machine makes the
        verdict "could not look", never "consistent".

    Forgeable:
        Measured in the job process: the timing step's timers and CUDA events in the job process.
        Still forgeable from inside: the timer functions are watched; a candidate that slows the other side it is compared with (the baseline runs in the same timing process by design).
    """

    id = "speedup-claim"
    order = 19
    title = "Claimed speedup vs kws's measurement"
    phase = "exclusive"
    timing_evidence = True

    @classmethod
    def skip_reason(cls, task: Task) -> str:
        if float(task.claims.speedup or 0.0) <= 0:
            return "the task makes no speedup claim ([claims] speedup = 0)"
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        claim = float(ctx.task.claims.speedup or 0.0)
        p = plan(ctx)
        if not p.representative:
            raise NotJudged(f"not representative here: {p.reason}; the claimed {claim:g}x is not judged "
                       "(run kws on a GPU)")
        m = measure(ctx)
        findings: list[Finding] = []
        for ct in m.cases:
            findings += self._case(ctx, m, ct, claim)
        if m.note and findings:
            findings[0].evidence["note"] = m.note
            findings[0].summary += f" ({m.note})"
        return findings

    def _case(self, ctx: CheckContext, m: Measurement, ct: CaseTiming, claim: float) -> list[Finding]:
        label = case_label(ct.case)
        role = m.plan.baseline_role
        ev: dict[str, Any] = {"timing": m.evidence(ct, claim), "case": ct.case}
        if ct.interpreted:
            ctx.could_not_judge(f"case {label}: {ev['timing']['reason']}")
            return [self.finding(ctx, "info", f"case {label}: {ev['timing']['reason']}; the claimed {claim:g}x is "
                                 "not judged", ev, case=ct.case)]
        if ct.ratio is None:
            why = "; ".join(f"{k}: {v.message[:200]}" for k, v in ct.errors.items()) or \
                "; ".join(f"{k}: {v}" for k, v in ct.stopped.items()) or "too few samples"
            ctx.could_not_judge(f"case {label}: kws could not time the candidate against the {role} ({why[:200]})")
            return [self.finding(ctx, "warn", f"case {label}: kws could not time the candidate against the {role} "
                                 f"({why}); the claimed {claim:g}x is not judged", ev, case=ct.case)]
        other = ct.warm_ratio if ct.primary == "cold" else ct.cold_ratio
        v = judge_claim(claim, ct.ratio, other)
        ev["verdict"] = {"position": v.position, "distance": v.distance, "margin": CLAIM_MARGIN,
                         "other_condition_holds": v.other_holds, "rule": v.reason}
        b, c = ct.sides["baseline"], ct.sides["candidate"]
        measured = (f"kws measures {ct.ratio.ratio:.3g}x {fmt_ci(ct.ratio.lo, ct.ratio.hi)} "
                    f"({ct.primary} cache, 95% CI; {ct.primary} medians {role} {b.median_ms:.4g} ms, candidate "
                    f"{c.median_ms:.4g} ms, n={min(b.n, c.n)}")
        if other is not None:
            measured += f"; {'warm' if ct.primary == 'cold' else 'cold'} {other.ratio:.3g}x {fmt_ci(other.lo, other.hi)}"
        measured += ")"
        where = f"on case {label} ({m.plan.case_source}), {m.device_text()}"
        busy = m.descheduled(ct)
        if busy and max(busy.values()) > 0.25:
            where += f" [machine busy: {max(busy.values()):.0%} of samples descheduled]"
        out: list[Finding] = []
        cond = "warm" if ct.primary == "cold" else "cold"
        noisy = noise(ct.ratio, max(busy.values()) if busy else 0.0)
        if v.severity is None and noisy:
            # a wide interval contains almost any claim: "consistent" would be a pass on a
            # measurement that could not tell (docs/timing.md; timingstats.noise)
            why = f"case {label}: the timing is too noisy here to judge the claimed {claim:g}x ({'; '.join(noisy)})"
            ctx.could_not_judge(why)
            out.append(self.finding(ctx, "info", f"{why}: {measured} {where}; not judged", ev, case=ct.case))
        elif v.severity is None:
            out.append(self.finding(ctx, "info", f"claimed {claim:g}x over the {role} is consistent: {measured} {where}",
                                    ev, case=ct.case))
        elif v.position == "above":
            tail = ""
            if v.other_holds and other is not None:
                inside = other.lo <= claim <= other.hi
                tail = (f" (it holds only with a {cond} cache: {claim:g}x is inside that interval "
                        f"[{other.lo:.3g}, {other.hi:.3g}])" if inside else
                        f" (above the {cond}-cache interval [{other.lo:.3g}, {other.hi:.3g}] too, by at most the "
                        f"{CLAIM_MARGIN:.0%} margin)")
            if not v.other_holds and v.severity == "warn":
                tail = f" (within the {CLAIM_MARGIN:.0%} margin)"
            sev = v.severity
            if sev == "fail":
                samples = ct.cold if ct.primary == "cold" else ct.warm
                rb = robustness(claim, ct.ratio, list(samples.get("baseline") or []),
                                list(samples.get("candidate") or []), max(busy.values()) if busy else 0.0)
                ev["verdict"]["robustness"] = rb.as_dict()
                if not rb.robust:
                    sev = "warn"
                    tail += f"; inconclusive on this machine: {'; '.join(rb.reasons)}"
                    ctx.could_not_judge(f"case {label}: the claim is above the measured interval, but not robustly "
                                         f"on this machine ({'; '.join(rb.reasons)[:300]})")
            out.append(self.finding(
                ctx, sev,
                f"claimed {claim:g}x over the {role} but {measured} {where}: the claim is {v.distance:.0%} above the "
                f"measured interval{tail}", ev, case=ct.case))
        else:
            what = ("is conservative" if v.severity == "info" else
                    "is far below the measurement (made for another case or device?)")
            text = f"claimed {claim:g}x over the {role} {what}: {measured} {where}"
            if v.severity == "warn":
                # kws's timed calls ran far faster than the author's own: a cache or replay that answers
                # repeated calls on one buffer (a timing loop) is one way; a claim made elsewhere another
                ev.update(suspect(ctx, "cache", f"case {label}: {text[:240]}"))
            out.append(self.finding(ctx, v.severity, text, ev, case=ct.case))
        # the timing panel shows every finding that carries evidence["timing"]: only the
        # claim's finding does; the others carry the case and their own numbers
        side_ev = {"case": ct.case, "device": ev["timing"]["device"]}
        out += self._torch_compile(ctx, m, ct, claim, side_ev)
        out += self._roofline(ctx, m, ct, claim, side_ev)
        return out

    def _torch_compile(self, ctx: CheckContext, m: Measurement, ct: CaseTiming, claim: float,
                       ev: dict[str, Any]) -> list[Finding]:
        if not m.plan.over_pytorch:
            return []
        if not m.plan.compile_enabled:
            return [self.finding(ctx, "info", f"the {m.plan.baseline_role} is PyTorch code; torch.compile of it was "
                                 "not measured (KWS_TORCH_COMPILE=0): only eager PyTorch", ev, case=ct.case)]
        role = m.plan.baseline_role
        label = case_label(ct.case)
        tc = ct.sides.get("torch_compile")
        err = ct.errors.get("torch_compile")
        if ct.compile_ratio is None or tc is None:
            why = (err.message if err is not None else "") or ct.stopped.get("torch_compile", "") or "no samples"
            ev2 = {**ev, "torch_compile_error": ct.errors_evidence()["torch_compile"] if err is not None else why}
            return [self.finding(ctx, "info", f"the {role} is PyTorch code, but torch.compile of it could not be "
                                 f"timed on case {label}: {why[:300]}; only eager PyTorch was measured", ev2,
                                 case=ct.case)]
        r = ct.compile_ratio
        eager = ct.sides["baseline"]
        ev = {**ev, "torch_compile": tc.evidence(), "eager": eager.evidence(),
              "torch_compile_ratio": r.ratio, "torch_compile_ratio_ci": r.as_list(), "ci_level": r.level}
        text = (f"strongest PyTorch baseline on case {label}: torch.compile({role}) {tc.median_ms:.4g} ms "
                f"(compiled in {tc.first_call_ms or math.nan:.3g} ms) vs eager {eager.median_ms:.4g} ms; the candidate "
                f"is {r.ratio:.3g}x {fmt_ci(r.lo, r.hi)} over torch.compile (claimed {claim:g}x over eager)")
        sev = "warn" if r.hi < 1.0 else "info"
        if sev == "warn":
            text += ": the compiled PyTorch baseline is faster than the candidate"
        return [self.finding(ctx, sev, text, ev, case=ct.case)]

    def _roofline(self, ctx: CheckContext, m: Measurement, ct: CaseTiming, claim: float,
                  ev: dict[str, Any]) -> list[Finding]:
        b = ct.bound
        if b is None:
            return []
        label = case_label(ct.case)
        ev3 = {**ev, "roofline": b.as_dict()}
        out: list[Finding] = []
        cand_cold = ct.cold.get("candidate")
        if cand_cold:
            t = float(sorted(cand_cold)[len(cand_cold) // 2])
            if beats(t, b, memory="read"):
                out.append(self.finding(
                    ctx, "fail", f"case {label}: the candidate's measured cold time {t:.4g} ms beats the device's "
                    f"roofline ({b.t_read_ms:.4g} ms to read {b.bytes:,} bytes at {b.bandwidth / 1e9:.1f} GB/s, "
                    f"{b.bandwidth_source}): the timed call does not do the work", ev3, case=ct.case))
        base = ct.sides.get("baseline")
        if base is not None and claim > 0:
            claimed_ms = base.median_ms / claim
            if beats(claimed_ms, b, memory="all"):
                floor = max(b.t_mem_ms if b.memory_applies else 0.0, b.t_flop_ms or 0.0)
                out.append(self.finding(
                    ctx, "fail", f"case {label}: the claimed {claim:g}x implies {claimed_ms:.4g} ms per call, below "
                    f"the roofline of {floor:.4g} ms ({b.bytes:,} bytes at {b.bandwidth / 1e9:.1f} GB/s"
                    f"{f', {b.flops:,} flops' if b.flops else ''}; {b.bandwidth_source}): physically impossible "
                    f"here", ev3, case=ct.case))
        if not out:
            parts = [f"{b.bytes:,} bytes / {b.bandwidth / 1e9:.1f} GB/s = {b.t_mem_ms:.3g} ms"]
            if b.t_flop_ms and b.peak_flops:  # a flop time has a peak (roofline.bound)
                parts.append(f"{b.flops:,} flops / {b.peak_flops / 1e12:.0f} TFLOP/s = {b.t_flop_ms:.3g} ms")
            note = "" if b.memory_applies else " (the working set fits in the cache: the memory bound applies to " \
                "cold times only)"
            out.append(self.finding(ctx, "info", f"case {label}: roofline {'; '.join(parts)} ({b.bandwidth_source})"
                                    f"{note}; measured and claimed times are above it", ev3, case=ct.case))
        return out
