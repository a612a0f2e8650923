"""``correctness``: the task's own cases at its own tolerance, recomputed honestly."""

from __future__ import annotations

from typing import Any

from workstation.analysis.compare import Comparison, region_text
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label


def failed_call_finding(check: Check, ctx: CheckContext, who: str, case: dict[str, Any], seed: int,
                        out: CallOutcome, severity: str = "fail") -> Finding:
    """A finding for a call that raised, crashed or timed out (shared by checks)."""
    cls = out.failure_class()
    return check.finding(
        ctx, severity,
        f"{who} {out.failure_text()} on case {case_label(case)} (seed {seed}) [{cls}]",
        {"case": case, "seed": seed, "failure_class": cls, **out.failure_evidence()},
        case=case, seed=seed,
    )


def mismatch_finding(check: Check, ctx: CheckContext, case: dict[str, Any], seeds: list[int],
                     comps: list[tuple[int, int, Any]], *, what: str = "") -> Finding:
    """One ``fail`` finding for a case whose outputs mismatch on ``seeds``.

    ``comps``: (seed, output index, Comparison) for every failing comparison; the first
    one's worst element leads the summary.
    """
    seed, j, c = comps[0]
    w = c.worst or {}
    region = region_text(c.bad_region)
    out_s = f" output {j}" if j else ""
    summary = (
        f"{what}case {case_label(case)}{out_s}: {c.reason}; worst at {w.get('index')}: "
        f"expected {w.get('expected'):.6g}, got {w.get('got'):.6g}"
        if isinstance(w.get("expected"), float) and isinstance(w.get("got"), float)
        else f"{what}case {case_label(case)}{out_s}: {c.reason}"
    )
    if region:
        summary += f" (mismatches in {region})"
    if len(seeds) > 1:
        summary += f"; seeds {', '.join(map(str, seeds))}"
    return check.finding(
        ctx, "fail", summary,
        {"case": case, "seeds": seeds, "output": j,
         "per_seed": [{"seed": s, "output": jj, **cc.evidence()} for s, jj, cc in comps]},
        case=case, seed=seed,
    )


@register
class Correctness(Check):
    """Mismatch at the task's own cases and tolerance, recomputed with fresh outputs.

    Catches:
        wrong results at the author's own cases that a stale or partial test hid: the
        contract's baseline, every other check varies something from here.

    How:
        for every declared case and every seed (default 0, 1, 2), kws makes fresh inputs and
        runs the reference and the candidate in *separate* child processes, so the reference
        never sees buffers the candidate touched and the candidate cannot patch the
        reference. Each output is compared over the whole tensor with torch.testing's rule at
        the declared tolerance (atol/rtol or ULP; torch.testing's per-dtype defaults where
        missing). A shape or dtype difference is a mismatch, as in `torch.testing`. The
        reference and candidate results are memoised for the run: every check that needs the
        declared cases reads these.

    Findings:
        | finding | severity |
        |---|---|
        | a case whose outputs mismatch: the case, the seeds, the output, the comparison's reason, the worst element (index, expected, got) and the mismatch region | `fail` |
        | the candidate raises, crashes or times out on a case (the failure class, the exception or signal; one finding per case and failure, listing the seeds) | `fail` |
        | the reference raises, crashes or times out on a case given with `--case` (on a declared case the task is broken: not judged) | `warn`, not judged |
        | how many case/seed runs are within tolerance and the one closest to the limit (the share of the allowed error its worst element uses) | `info` |
        | a declared case left out because the interpreter fidelity probe fails for its dtype (docs/checks.md, "The interpreter fidelity layer") | `info` |

    Limits:
        only the declared cases and seeds; the other checks vary shapes, layouts and values.
        On the CPU, Triton runs under the interpreter (docs/checks.md, "The interpreter fidelity layer"), so
        GPU-only behaviour (reduction order, undefined lanes) is not seen here.

    Not judged when:
        `make_inputs` raises, exits or returns what the contract does not allow on a declared
        case (None, a dict, a generator, tensors on `meta` or another device, no tensor of the
        case's dtype), the reference raises on a declared case or returns non-finite values
        for finite inputs where `[contract] nonfinite_inputs = false`: a task problem naming
        the file (`inputs.py:make_inputs`, `reference.py:...`), never a fail of the candidate;
        a library a task file imports is not installed here, or the candidate's backend cannot
        run here (the install hint); no declared case kws can judge on this device. A declared
        case of a dtype the Triton interpreter does not compute as compiled Triton does (its
        self-test failed, or could not run) beside cases it can judge: not judged for that case
        (named in an `info` and in `not_judged`), the others judged.

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "correctness"
    order = 1
    title = "Declared cases at the declared tolerance"

    def run(self, ctx: CheckContext) -> list[Finding]:
        unjudged = [(c, ctx.unjudged_reason(str(c.get("dtype", "")))) for c in ctx.all_cases]
        left_out = [self.finding(ctx, "info", f"case {case_label(c)} not judged: {why}", {"case": c, "reason": why},
                                 case=c) for c, why in unjudged if why]
        for c, why in unjudged:
            if why:  # a declared case kws cannot judge here is never passed
                ctx.could_not_judge(f"case {case_label(c)}: {why}")
        pairs = ctx.declared_pairs()
        refs = ctx.reference(pairs)
        cands = ctx.candidate(pairs)
        findings: list[Finding] = []
        worst_ratio = 0.0
        worst_at: tuple[dict[str, Any], int, Comparison] | None = None
        n_ok = 0
        by_case: dict[int, list[tuple[int, int, Any]]] = {}
        failed: dict[tuple[str, int, str], list[tuple[int, CallOutcome]]] = {}
        for k, ((case, seed), ref, cand) in enumerate(zip(pairs, refs, cands, strict=True)):
            ci = k // len(ctx.seeds)
            if not ref.ok:
                failed.setdefault(("the reference", ci, ref.failure_text()), []).append((seed, ref))
                continue
            if not cand.ok:
                failed.setdefault(("the candidate", ci, cand.failure_text()), []).append((seed, cand))
                continue
            comps = ctx.compare(ref, cand, case)
            bad = [(seed, j, c) for j, c in enumerate(comps) if not c.ok]
            if bad:
                by_case.setdefault(ci, []).extend(bad)
                continue
            n_ok += 1
            for comp in comps:
                w = comp.worst or {}
                allowed, err = w.get("allowed"), w.get("abs_err")
                if isinstance(allowed, float) and isinstance(err, float) and allowed > 0:
                    if err / allowed >= worst_ratio:
                        worst_ratio, worst_at = err / allowed, (case, seed, comp)
        for (who, ci, _), runs in failed.items():
            seed, out = runs[0]
            f = failed_call_finding(self, ctx, who, ctx.cases[ci], seed, out,
                                    "warn" if who == "the reference" else "fail")
            if who == "the reference":  # the candidate was not judged on that case
                ctx.could_not_judge(f"case {case_label(ctx.cases[ci])}: the reference {out.failure_text()[:160]}")
            if len(runs) > 1:
                f.summary += f"; same on seeds {', '.join(str(s) for s, _ in runs)}"
                f.evidence["seeds"] = [s for s, _ in runs]
            findings.append(f)
        for ci, mismatches in by_case.items():
            case = ctx.cases[ci]
            findings.append(mismatch_finding(self, ctx, case, sorted({s for s, _, _ in mismatches}), mismatches))
        if n_ok and worst_at is not None:
            case, seed, comp = worst_at
            findings.append(self.finding(
                ctx, "info",
                f"{n_ok} of {len(pairs)} case/seed runs within tolerance; closest to the limit: "
                f"case {case_label(case)} seed {seed}, max abs err {comp.max_abs:.3g} "
                f"({100 * worst_ratio:.0f}% of the allowed error at its worst element)",
                {"case": case, "seed": seed, "headroom_used": worst_ratio, **comp.evidence()},
                case=case, seed=seed,
            ))
        return left_out + findings
