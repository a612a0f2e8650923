"""``failure-mismatch``: the failure a task reports vs the failure kws observes."""

from __future__ import annotations

import math
import re
from typing import Any

from workstation.engine.check import Check, Finding, Skip, register
from workstation.engine.context import CheckContext, case_label

#: words in a free-text failure report that name a failure class (used when
#: ``failure_class`` is empty); first match wins, most specific first.
_CLASS_WORDS: list[tuple[str, str]] = [
    ("nondeterministic", r"non-?determinis|differs? between runs|flaky|bitwise"),
    ("compile-error", r"compil|lowering|ptxas|triton\.compiler|syntax|constexpr"),
    ("timeout", r"hang|time ?out|timed out|never (finishes|returns)|deadlock"),
    ("crash", r"segfault|segmentation|illegal (memory|address)|core dump|abort|crash|killed"),
    ("nan", r"\bnan\b|\binf\b|not a number"),
    ("slow", r"slow|slower|regress(ion)? in (speed|time)|latency"),
    ("runtime-error", r"raises|exception|error:|runtimeerror|valueerror|typeerror|indexerror|assert"),
    ("mismatch", r"mismatch|differ|wrong|incorrect|max abs|allclose|tolerance|off by"),
]


def claimed_class(failure_class: str, failure: str) -> tuple[str | None, str]:
    """The reported failure class and where it came from (``failure_class`` or the text)."""
    if failure_class:
        return failure_class, "[claims] failure_class"
    text = failure.lower()
    for cls, pat in _CLASS_WORDS:
        if re.search(pat, text):
            return cls, f"inferred from the failure text ({pat!r})"
    return None, "no failure_class and no recognisable words in the failure text"


@register
class FailureMismatch(Check):
    """The failure the task reports is not the failure kws observes.

    For a task with ``[claims] status = "fail"``, kws runs the candidate on every declared
    case and seed and classifies what actually happens, per the contract's classes:
    ``compile-error`` (Triton rejected the program: a ``CompilationError`` on a GPU, an
    error from ``triton.language``/``triton.compiler`` under the interpreter; or a C++/CUDA
    extension build failure), ``runtime-error`` (the call raised), ``crash`` (the process
    died from a signal or exited), ``timeout``, ``nan`` (NaN/inf where the reference is
    finite), ``mismatch`` (outside the declared tolerance), ``nondeterministic`` (two
    runs on equal inputs differ bitwise; checked when that is the claim). It compares the
    observed classes with the claimed one (``failure_class``, else inferred from the
    ``failure`` text). A debugging task whose reported failure is not its real one sends
    the fixer after the wrong bug.

    With ``status = "pass"`` the check is ``skip``: ``correctness`` and the rest speak.
    ``slow`` claims are judged by ``speedup-claim``; here they are only noted.
    """

    id = "failure-mismatch"
    order = 21
    title = "Reported failure vs observed failure"

    def run(self, ctx: CheckContext) -> list[Finding]:
        claims = ctx.task.claims
        if claims.status != "fail":
            raise Skip('the task claims status = "pass": correctness and the rest speak')
        claimed, source = claimed_class(claims.failure_class, claims.failure)
        pairs = ctx.declared_pairs()
        refs = ctx.reference(pairs)
        cands = ctx.candidate(pairs)
        observed: list[dict[str, Any]] = []
        for (case, seed), ref, cand in zip(pairs, refs, cands, strict=True):
            cls = cand.failure_class()
            detail = cand.failure_text() if cls else ""
            if cls is None and ref.ok:
                comps = ctx.compare(ref, cand, case)
                bad = [c for c in comps if not c.ok]
                if bad:
                    c = bad[0]
                    ref_finite = all(math.isfinite(v) for v in [c.max_abs]) and c.nan_expected == 0
                    cls = "nan" if (c.nan_got or c.inf_got) and ref_finite else "mismatch"
                    detail = c.reason
            observed.append({"case": case, "seed": seed, "class": cls or "pass", "detail": detail})
        if claimed == "nondeterministic":
            observed.extend(self._nondeterminism(ctx))
        classes = sorted({o["class"] for o in observed})
        failing = [o for o in observed if o["class"] != "pass"]
        ev = {"claimed": claimed, "claimed_from": source, "failure_text": claims.failure,
              "observed_classes": classes, "observations": observed}
        if claimed == "slow":
            return [self.finding(ctx, "info", "the task reports a slowdown; speedup-claim measures it", ev)]
        if not failing:
            return [self.finding(ctx, "fail",
                                 f"the reported failure ({claimed or claims.failure!r}) does not reproduce: "
                                 f"every declared case passes at the declared tolerance", ev)]
        first = failing[0]
        if claimed is None:
            return [self.finding(ctx, "warn",
                                 f"the report names no failure class; kws observes {', '.join(classes)}: "
                                 f"{first['detail']} on case {case_label(first['case'])}", ev,
                                 case=first["case"], seed=first["seed"])]
        if claimed in classes:
            return [self.finding(ctx, "info",
                                 f"the reported {claimed} reproduces on {sum(o['class'] == claimed for o in observed)}"
                                 f" of {len(observed)} runs", ev)]
        return [self.finding(
            ctx, "fail",
            f"reported {claimed}, observed {', '.join(c for c in classes if c != 'pass')}: "
            f"{first['detail']} on case {case_label(first['case'])} (seed {first['seed']})",
            ev, case=first["case"], seed=first["seed"])]

    def _nondeterminism(self, ctx: CheckContext) -> list[dict[str, Any]]:
        """Run each declared case twice (seed 0) in one child and compare bitwise."""
        steps = [ctx.call_step("candidate", c, 0, repeat=1) for c in ctx.cases for _ in range(2)]
        outs = ctx.calls(steps)
        obs = []
        for i, case in enumerate(ctx.cases):
            a, b = outs[2 * i], outs[2 * i + 1]
            if a.ok and b.ok:
                same = all((x.values.tobytes() == y.values.tobytes()) for x, y in zip(a.outputs, b.outputs, strict=False))
                obs.append({"case": case, "seed": 0, "class": "pass" if same else "nondeterministic",
                            "detail": "" if same else "two runs on equal inputs differ bitwise"})
        return obs
