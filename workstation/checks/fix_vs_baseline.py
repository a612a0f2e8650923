"""``fix-vs-baseline``: a debugging fix against the buggy code it replaces."""

from __future__ import annotations

from typing import Any

from workstation.checks.failure_mismatch import claimed_class
from workstation.checks.support.replay import (
    Replayed,
    counts,
    outcome_class,
    replay,
    replayed_evidence,
    require_baseline,
)
from workstation.checks.support.trials import failure_text
from workstation.engine.check import Check, Finding, NotJudged, register
from workstation.engine.context import CheckContext

MAX_LISTED = 6


def _claimed(task: Any) -> tuple[str | None, str]:
    """The reported bug's class (None: any baseline failure is the bug) and where it was read from."""
    stated = bool(task.claims.failure_class or task.claims.failure)
    claimed, source = claimed_class(task.claims.failure_class, task.claims.failure) if stated else (None, "")
    if claimed in ("nondeterministic", "slow"):
        source += f"; a {claimed} bug is not a per-call outcome: any baseline failure counts here " \
            "(nondeterminism and speedup-claim judge that class)"
        claimed = None
    return claimed, source if stated else "no failure stated: any baseline failure"


@register
class FixVsBaseline(Check):
    """A debugging fix does not fix the reported bug, or breaks what worked.

    Scheduled for:
        `kind = "debugging"` with `status = "pass"` (a fix): the candidate is a fix and
        `entry.baseline` the buggy code before it. (A failure report under review,
        `status = "fail"`, is `failure-mismatch`'s shape and is not scheduled here.)

    Catches:
        a fix whose reported bug still shows on the candidate, or that breaks what worked; a bug
        that reproduces on the baseline only with another class than reported.

    How:
        (phase `after`): every candidate call of the battery that fails, whatever their number,
        and the passing ones up to 40 on the CPU, 160 on a GPU (declared cases, derived shapes,
        layouts, value variants, dtype runs) are replayed on `entry.baseline` and both are classified against the reference with the battery's rule.
        The bug is `[claims] failure_class` / `failure` (the baseline's failure; see task-format.md;
        when both are empty, any failure of the baseline is the bug). The candidate still failing
        counts in any class: a fix that turns a compile error into a wrong result has not fixed it.

    Findings:
        | finding | severity |
        |---|---|
        | it reproduces only with another class | `warn` |
        | the candidate still fails on a call where the baseline shows the bug (a tolerance mismatch on transformed values is left to special-values) | `fail` |
        | a call that passes on the baseline fails on the candidate | `fail` |
        | the fix holds (how many calls showed the bug) | `info` |

    Example:
        (`layernorm-fix`): `the candidate still fails where the baseline shows the bug:
        case M=16 N=1000 float32 seed 0 (inputs: layout:padded-rows): the baseline compile-error, the
        candidate 15000 NaN ...`.

    Source:
        fixes that silence the reported symptom (a compile error
        at a non-power-of-two size) and leave the computation wrong there, or that fix one size
        and break another: the reason a debugging review reruns the original failure and the
        cases that passed before.

    Limits:
        only the inputs the battery ran (bounded by the interpreter's cost on the CPU); a
        bug that needs a GPU to show (a race, a crash in compiled code) does not reproduce under
        the Triton interpreter: then the fix is not judged here (a GPU run judges it).

    Not judged when:
        the reported bug does not reproduce on any call of the baseline here ("cannot be
        verified on this device": `NotJudged`, or `could_not_judge` beside a `fail` for a call
        the fix breaks); the baseline cannot run here (its backend, a library it imports);
        no candidate call ran to replay; some calls were not run on the baseline (skipped after
        an earlier hang: `could_not_judge` for those).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "fix-vs-baseline"
    order = 33
    title = "Debugging fix vs the buggy baseline"
    phase = "after"
    kinds = ("debugging",)

    @classmethod
    def applies(cls, task: Any) -> str:
        if why := super().applies(task):
            return why
        if task.claims.status != "pass":
            return f"only for a fix under review ([claims] status = \"pass\"); this task claims {task.claims.status!r}"
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        task = ctx.task
        require_baseline(ctx, "a fix under review (status = \"pass\") without entry.baseline: there is no buggy "
                         "code to reproduce the bug on")
        claimed, source = _claimed(task)
        items = replay(ctx, "baseline")
        if not items:
            raise NotJudged("no candidate call of the battery ran with a reference result to replay on the baseline")
        device = ctx.device.label
        unrun = [it for it in items if not it.other_ran]
        items = [it for it in items if it.other_ran]
        if unrun:
            ctx.could_not_judge(f"{len(unrun)} call(s) were not run on the baseline (e.g. {unrun[0].line()}: "
                                 f"{unrun[0].other_out.death})")
        base_fail = [it for it in items if it.other.failed]
        bug = [it for it in base_fail if claimed is None or outcome_class(it.other) == claimed]
        ev0 = {"claimed": claimed, "claimed_from": source,
               "failure_text": task.claims.failure, "device": device, "replayed": len(items), "outcomes": counts(items)}
        findings: list[Finding] = []
        if not bug:
            findings, bug = self._not_reproduced(ctx, claimed, items, base_fail, ev0)
        return findings + self._verdicts(ctx, items, bug, ev0)

    def _not_reproduced(self, ctx: CheckContext, claimed: str | None, items: list[Replayed],
                        base_fail: list[Replayed], ev0: dict[str, Any]) -> tuple[list[Finding], list[Replayed]]:
        """Where the reported bug does not show on the baseline: the findings, and the calls that
        stand for the bug (any baseline failure; none when the baseline passes everywhere).

        Raises:
            NotJudged: the baseline passes every call and the fix breaks none of them.
        """
        if base_fail:
            other = sorted({outcome_class(it.other) for it in base_fail})
            first = base_fail[0]
            return [self.finding(
                ctx, "warn",
                f"the reported bug ({claimed}) does not reproduce on the baseline as reported: it fails as "
                f"{', '.join(other)} instead ({first.line()}: {failure_text(first.other)})",
                {**ev0, **replayed_evidence(first)}, case=first.case, seed=first.seed)], base_fail
        # not reproducing here is not evidence against the fix: a bug that needs a GPU
        # (a race, undefined lanes, compiled-code crashes) does not show under the
        # interpreter, and the battery's inputs may not reach it
        why = (f"the reported bug ({claimed or 'any failure'}) does not reproduce on the baseline here: it "
               f"passes all {len(items)} calls the battery made ({ev0['device']}), so the fix cannot be verified on "
               "this device")
        if not any(it.other.status == "pass" and it.cand.failed for it in items):
            raise NotJudged(why)
        ctx.could_not_judge(why)
        return [], []

    def _verdicts(self, ctx: CheckContext, items: list[Replayed], bug: list[Replayed],
                  ev0: dict[str, Any]) -> list[Finding]:
        """The findings on the candidate: still failing where the baseline shows the bug,
        breaking what passed on the baseline, or (neither) the fix holds."""
        findings: list[Finding] = []
        # where the baseline produced no value to compare with, a tolerance mismatch on
        # transformed values is special-values' to judge (against its float64 oracle)
        still = [it for it in bug if it.cand.failed and not (it.valued and it.cand.status == "mismatch")]
        if still:
            first = still[0]
            findings.append(self.finding(
                ctx, "fail",
                f"the candidate still fails where the baseline shows the bug: {first.line()}: the baseline "
                f"{outcome_class(first.other)}, the candidate {failure_text(first.cand)}"
                + (f" ({len(still)} of {len(bug)} calls that show the bug)" if len(still) > 1 else ""),
                {**ev0, **replayed_evidence(first), "still_failing": [replayed_evidence(it) for it in still[:MAX_LISTED]]},
                case=first.case, seed=first.seed))
        regress = [it for it in items if it.other.status == "pass" and it.cand.failed]
        if regress:
            first = regress[0]
            findings.append(self.finding(
                ctx, "fail",
                f"the fix breaks what worked: {first.line()} passes on the baseline and the candidate "
                f"{failure_text(first.cand)}" + (f" ({len(regress)} such calls)" if len(regress) > 1 else ""),
                {**ev0, **replayed_evidence(first), "regressions": [replayed_evidence(it) for it in regress[:MAX_LISTED]]},
                case=first.case, seed=first.seed))
        fixed = [it for it in bug if it.cand.status == "pass"]
        if not still and not regress and bug:
            findings.append(self.finding(
                ctx, "info",
                f"the fix holds: the baseline shows the bug on {len(bug)} of {len(items)} calls "
                f"({', '.join(sorted({outcome_class(it.other) for it in bug}))}; e.g. {bug[0].line()}), the candidate "
                f"passes all {len(fixed)} of them, and no call that passed on the baseline fails on the candidate",
                {**ev0, "fixed": [replayed_evidence(it) for it in fixed[:MAX_LISTED]]}))
        return findings
