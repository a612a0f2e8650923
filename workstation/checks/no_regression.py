"""``no-regression``: an optimization that is wrong where the code before it was right."""

from __future__ import annotations

from workstation.checks.speedup_claim import fmt_ci
from workstation.checks.support.replay import counts, replay, replayed_evidence, require_baseline
from workstation.checks.support.timing import measure, plan
from workstation.checks.support.trials import failure_text
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext, case_label

MAX_LISTED = 6


@register
class NoRegression(Check):
    """An optimization that regresses correctness against the code before it, or is slower.

    Scheduled for:
        `kind = "optimization"` with `entry.baseline` (the code before the change).

    Catches:
        an optimization that fails where the baseline passes (a dropped max-subtraction that
        overflows on large inputs, a vectorised tail that reads past the end), or is slower than
        it.

    How:
        (phase `after`): every candidate call the battery made that fails (mismatch, NaN,
        raised, crashed, timed out; whatever their number) and the passing ones up to 40 on
        the CPU, 160 on a GPU (declared cases, derived shapes under edge-shapes' poisoned masked
        lanes, layouts, value variants, the numerics audit's dtype runs;
        `workstation/checks/support/replay.py`) is replayed on the baseline, and both are judged
        against the reference with the battery's own rule. Speed, by kws's own
        timing protocol (`docs/timing.md`; the measurement `speedup-claim` uses, shared): with a
        `[claims] speedup` it is `speedup-claim`'s to judge and this check only points there;
        without one, the measured ratio median(baseline) / median(candidate) is reported with its
        95% bootstrap interval.

    Findings:
        | finding | severity |
        |---|---|
        | a call passes on the baseline and fails on the candidate | `fail` |
        | measured speedup interval entirely below 1 (no claim): slower than what it replaces | `warn` |
        | calls failing on both (the failure is older than the optimization; the other checks report it); no regression; speed not judged (not representative: Triton under the interpreter, CUDA on the CPU) or the ratio | `info` |

    Example:
        (`softmax-overflow`): `the optimization regresses: case M=32 N=500 float32 seed 0
        (inputs: magnitude:spikes) passes on the baseline and the candidate 32 NaN ...`.

    Source:
        optimizations validated only on the benchmark shape or on the author's cases, which
        trade away the numerical safeguards or the tail handling of the original (the reason
        performance PRs rerun the original's test matrix).

    Limits:
        only the inputs the battery ran; GPU-only regressions do not show under the interpreter.

    Not judged when:
        the baseline's backend cannot run here (a CUDA baseline without a GPU or the CPU emulation, a Pallas one
        without the `pallas` extra, a library it imports is not installed), no candidate call
        ran with a reference result to replay (`NotJudged`), or a call failing on the candidate
        was not run on the baseline (skipped after an earlier hang) and nothing regresses
        elsewhere (`could_not_judge`: never `pass`). On a GPU, a case kws could not time on both
        sides: not judged for its speed (the `info` names it).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files); for its speed, the timing step's timers and CUDA events in the job process.
        Still forgeable from inside: nothing short of computing the right values for its pass/fail comparison (the harness's writer and the result path are watched, and a result file written by task code is refused); for its speed, the timer functions are watched, but a candidate could slow the baseline it is compared with (the baseline runs in the same timing process by design).
    """

    id = "no-regression"
    order = 35
    title = "Optimization: no regression against the baseline"
    phase = "after"
    kinds = ("optimization",)

    def run(self, ctx: CheckContext) -> list[Finding]:
        require_baseline(ctx, "an optimization task without entry.baseline: there is no code before the change to "
                         "compare with")
        items = replay(ctx, "baseline")
        if not items:
            raise NotJudged("no candidate call of the battery ran with a reference result to replay on the baseline")
        findings: list[Finding] = []
        regress = [it for it in items if it.other.status == "pass" and it.cand.failed]
        both = [it for it in items if it.other.failed and it.cand.failed and it.other_ran]
        failing = [it for it in items if it.cand.failed]
        unrun = [it for it in failing if not it.other_ran]
        ev0 = {"replayed": len(items), "candidate_failing": len(failing), "outcomes": counts(items),
               "device": ctx.device.label}
        if regress:
            first = regress[0]
            kinds = sorted({it.label for it in regress})
            findings.append(self.finding(
                ctx, "fail",
                f"the optimization regresses: {first.line()} passes on the baseline and the candidate "
                f"{failure_text(first.cand)}" + (f" ({len(regress)} such calls: {'; '.join(kinds)})"
                                                 if len(regress) > 1 else ""),
                {**ev0, **replayed_evidence(first), "regressions": [replayed_evidence(it) for it in regress[:MAX_LISTED]]},
                case=first.case, seed=first.seed))
        if both:
            findings.append(self.finding(
                ctx, "info", f"{len(both)} call(s) fail on the baseline too (older than the optimization; e.g. "
                f"{both[0].line()}: the baseline {failure_text(both[0].other)})",
                {**ev0, "both_fail": [replayed_evidence(it) for it in both[:MAX_LISTED]]}))
        if unrun:
            ctx.could_not_judge(
                f"{len(unrun)} call(s) failing on the candidate were not run on the baseline (e.g. {unrun[0].line()}: "
                f"{unrun[0].other_out.death}): whether they regress is not known")
        if not regress:
            findings.append(self.finding(
                ctx, "info", f"no regression: of {len(items)} calls the battery made ({len(failing)} failing on the "
                f"candidate, every one replayed), every one that passes on the baseline passes on the candidate "
                f"({', '.join(f'{k}: {v}' for k, v in counts(items).items())})", ev0))
        findings += self._speed(ctx)
        return findings

    def _speed(self, ctx: CheckContext) -> list[Finding]:
        claim = float(ctx.task.claims.speedup or 0.0)
        if claim > 0:
            return [self.finding(ctx, "info", f"the claimed {claim:g}x is judged by speedup-claim (same timing protocol)")]
        p = plan(ctx)
        if not p.representative:
            return [self.finding(ctx, "info", f"speed not judged: {p.reason}")]
        m = measure(ctx)
        out = []
        for ct in m.cases:
            if ct.ratio is None:
                ctx.could_not_judge(f"case {case_label(ct.case)}: kws could not time candidate and baseline, so "
                                     "whether the optimization is slower there was not measured")
                out.append(self.finding(ctx, "info", f"case {case_label(ct.case)}: kws could not time candidate and "
                                        "baseline", {"case": ct.case, "errors": ct.errors_evidence(), "stopped": ct.stopped},
                                        case=ct.case))
                continue
            r = ct.ratio
            text = (f"case {case_label(ct.case)}: the candidate is {r.ratio:.3g}x {fmt_ci(r.lo, r.hi)} over the baseline "
                    f"({ct.primary} cache, 95% CI, {m.device_text()})")
            sev = "warn" if r.hi < 1.0 else "info"
            if sev == "warn":
                text += ": the optimization is slower than the code it replaces"
            out.append(self.finding(ctx, sev, text, {"case": ct.case, "ratio": r.ratio, "ci": r.as_list(),
                                                     "condition": ct.primary}, case=ct.case))
        return out
