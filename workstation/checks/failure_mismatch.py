"""``failure-mismatch``: the failure a task reports vs the failure kws observes."""

from __future__ import annotations

import math
import re
from typing import Any

from workstation.engine.check import REGISTRY, Check, Finding, Skip, register
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


#: dtype names and the short spellings reports use, for reading a claim's scope.
_DTYPE_WORDS: dict[str, str] = {
    "float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float32": "float32", "fp32": "float32", "float64": "float64", "fp64": "float64",
    "float8_e4m3fn": "float8_e4m3fn", "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
}
#: a size condition in a report: ``N >= 4096``, ``K > 1024``, ``M = 1``.
_COND_RE = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\s*(>=|<=|==|=|>|<|≥|≤)\s*(\d+)\b")
#: the checks whose fail findings name a case (evidence ``case``) and so a failure the
#: claim must cover.
BATTERY = ("correctness", "edge-shapes", "noncontiguous", "special-values", "nondeterminism", "out-of-bounds")


def claim_scope(text: str) -> dict[str, Any]:
    """What a free-text failure report limits itself to: ``dtypes`` it names and size
    ``conditions`` (``[("N", ">=", 4096)]``). Empty lists: no limit stated."""
    low = text.lower()
    dtypes = sorted({v for k, v in _DTYPE_WORDS.items() if re.search(rf"(?<![a-z0-9_]){re.escape(k)}(?![a-z0-9_])", low)})
    conds = [(m.group(1), m.group(2).replace("≥", ">=").replace("≤", "<=").replace("==", "="), int(m.group(3)))
             for m in _COND_RE.finditer(text)]
    return {"dtypes": dtypes, "conditions": conds}


def _family(cls: str) -> str:
    """A failure class for comparing scope: ``runtime-error:ValueError`` -> ``runtime-error``;
    ``nan`` counts as ``mismatch`` (a wrong value either way)."""
    c = (cls or "").split(":")[0]
    return "mismatch" if c == "nan" else c


def within_claim(obs: dict[str, Any], claimed: str | None, scope: dict[str, Any]) -> list[str]:
    """Why an observed failure lies outside the claim (empty: the claim covers it)."""
    why = []
    case = obs.get("case") or {}
    if claimed and _family(obs["class"]) != _family(claimed):
        why.append(f"class {obs['class']} (claimed {claimed})")
    if scope["dtypes"] and case.get("dtype") not in scope["dtypes"]:
        why.append(f"dtype {case.get('dtype')} (claimed {', '.join(scope['dtypes'])})")
    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           "<": lambda a, b: a < b, "=": lambda a, b: a == b}
    for name, op, v in scope["conditions"]:
        x = case.get(name)
        if isinstance(x, int) and not isinstance(x, bool) and not ops[op](x, v):
            why.append(f"{name} = {x} (claimed {name} {op} {v})")
    return why


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

    Catches:
        a debugging task (`[claims] status = "fail"`) whose reported failure is not
        the failure kws observes: it does not reproduce, it is of another class, or it is
        **narrower** than the real one. A debugging task whose reported failure is not its real
        one sends the fixer after the wrong bug (a fixer who trusts a narrow report fixes one bug
        of several).

    How:
        runs after every other check (`phase = "after"`), with their results. The
        candidate's declared cases and seeds are classified per the contract's classes:
        `compile-error` (Triton rejected the program: a `CompilationError` on a GPU, an error
        from `triton.language`/`triton.compiler` under the interpreter; or a C++/CUDA extension
        build failure), `runtime-error` (the call raised), `crash` (the process died from a
        signal or exited), `timeout`, `nan` (NaN/inf where the reference is finite), `mismatch`
        (outside the declared tolerance), `nondeterministic` (two runs on equal inputs differ
        bitwise; checked when that is the claim). The claim's scope is read
        from its text (`checks.failure_mismatch.claim_scope`): the dtypes it names (`fp16`,
        `bfloat16`, ...) and size conditions (`N >= 4096`), plus its class (`failure_class`, else
        inferred from the `failure` text). Every fail finding of `correctness`, `edge-shapes`,
        `noncontiguous`, `special-values`, `nondeterminism` and `out-of-bounds` whose evidence
        names a case is a failure the battery observed (`nan` counts as `mismatch` when classes
        are compared). `slow` claims are judged by `speedup-claim`; here they are only noted.

    Findings:
        | finding | severity |
        |---|---|
        | no failure at all: the report does not reproduce | `fail` |
        | the observed failures are of a different class only | `fail` |
        | the reported failure reproduces but some observed failure lies outside its scope (another dtype, a size the condition excludes, another class): "the report is narrower than the failure", with both sides in the evidence (`claim_scope`, `observed_outside_claim`, `battery_failures`) | `fail` |
        | every observed failure lies inside the claim | `info` |
        | the task claims `status = "pass"` (`correctness` and the rest speak) | `skip` |

    Limits:
        the scope is read from free text; a claim that states its limits in words
        kws does not parse ("only on large inputs") is taken as unlimited in that respect.

    Not judged when:
        the candidate's backend or a library a task file imports cannot run here, a step was
        stopped by a limit that says nothing about the code, or `make_inputs` or the reference is
        broken on a declared case: `NotJudged`. A run where the reference died is not compared:
        not judged for it (and left out of the counts). The battery's failures are read from the
        other checks' results: where the claim reproduces and no observed failure lies outside it,
        a battery check that applies to the task and was not judged, errored or was not in the run
        (`--only`) makes the narrowness not judged, naming it (`battery_not_judged` in the
        evidence); a battery check skipped as not applying contributes nothing. On the CPU a
        `nondeterministic` claim is tested only by two calls in one process (the interpreter orders
        atomics): a scheduling race does not reproduce there and is reported as such (`fail`).

    Forgeable:
        Measured in the job process: the outputs only (copied by the harness into the result files).
        Still forgeable from inside: nothing short of computing the right values: the harness's writer and the result path are watched, and a result file written by task code is refused.
    """

    id = "failure-mismatch"
    order = 21
    title = "Reported failure vs observed failure"
    phase = "after"

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
            if cls is None and not ref.ok:
                ctx.could_not_judge(f"case {case_label(case)} seed {seed}: the reference {ref.failure_text()}, so "
                                     "the candidate's output there was not compared")
                continue
            if cls is None:
                comps = ctx.compare(ref, cand, case)
                bad = [c for c in comps if not c.ok]
                if bad:
                    c = bad[0]
                    ref_finite = all(math.isfinite(v) for v in [c.max_abs]) and c.nan_expected == 0
                    cls = "nan" if (c.nan_got or c.inf_got) and ref_finite else "mismatch"
                    detail = c.reason
            observed.append({"check": "failure-mismatch", "case": case, "seed": seed, "class": cls or "pass",
                             "detail": detail})
        if claimed == "nondeterministic":
            observed.extend(self._nondeterminism(ctx))
        classes = sorted({o["class"] for o in observed})
        failing = [o for o in observed if o["class"] != "pass"]
        ev: dict[str, Any] = {"claimed": claimed, "claimed_from": source, "failure_text": claims.failure,
              "observed_classes": classes, "observations": observed}
        if claimed == "slow":
            return [self.finding(ctx, "info", "the task reports a slowdown; speedup-claim measures it", ev)]
        if not failing and ctx.unjudged:
            return [self.finding(ctx, "info", f"the reported failure ({claimed or claims.failure!r}) does not show on "
                                 f"the {len(observed)} run(s) compared; the others were not compared", ev)]
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
            scope = claim_scope(claims.failure)
            battery = self._battery(ctx)
            blind = self._battery_unjudged(ctx)
            outside = []
            for o in failing + battery:
                why = within_claim(o, claimed, scope)
                if why:
                    outside.append({**o, "outside_claim": why})
            ev.update({"claim_scope": {"class": claimed, **scope}, "battery_failures": battery})
            n_rep = sum(o['class'] == claimed for o in observed)
            if outside:
                ev["observed_outside_claim"] = outside
                o = outside[0]
                return [self.finding(
                    ctx, "fail",
                    f"the report is narrower than the failure: the reported {claimed} reproduces on {n_rep} of "
                    f"{len(observed)} runs, but kws also observes {len(outside)} failure(s) outside it, e.g. "
                    f"{o['check']} on case {case_label(o['case'])}: {'; '.join(o['outside_claim'])}"
                    + (f" ({o['detail'][:160]})" if o.get("detail") else "")
                    + f"; claimed: {claims.failure!r}",
                    ev, case=o["case"], seed=o.get("seed"))]
            if blind:
                ev["battery_not_judged"] = blind
                ctx.could_not_judge(
                    "whether the report is narrower than the failure was not fully judged: "
                    + "; ".join(f"{b['check']} {b['why']}" for b in blind[:3])
                    + (f"; {len(blind) - 3} more" if len(blind) > 3 else "")
                    + ": the failures it would have observed were not compared with the claim")
            return [self.finding(ctx, "info",
                                 f"the reported {claimed} reproduces on {n_rep} of {len(observed)} runs, and every "
                                 f"failure the battery observed lies within the claim", ev)]
        return [self.finding(
            ctx, "fail",
            f"reported {claimed}, observed {', '.join(c for c in classes if c != 'pass')}: "
            f"{first['detail']} on case {case_label(first['case'])} (seed {first['seed']})",
            ev, case=first["case"], seed=first["seed"])]

    @staticmethod
    def _battery(ctx: CheckContext) -> list[dict[str, Any]]:
        """The failures other checks of this run observed: each fail finding of a
        :data:`BATTERY` check whose evidence names a case."""
        out = []
        for cid in BATTERY:
            res = ctx.results.get(cid)
            for f in getattr(res, "findings", None) or []:
                ev = f.evidence or {}
                case = ev.get("case")
                if f.severity != "fail" or not isinstance(case, dict):
                    continue
                cls = ev.get("class") or ("nan" if "nan" in f.summary.lower() and cid != "nondeterminism" else
                                          "nondeterministic" if cid == "nondeterminism" else "mismatch")
                out.append({"check": cid, "case": case, "seed": ev.get("seed"), "class": str(cls),
                            "detail": f.summary[:300]})
        return out

    @staticmethod
    def _battery_unjudged(ctx: CheckContext) -> list[dict[str, str]]:
        """The :data:`BATTERY` checks that apply to the task and did not look in this run:
        each ``{"check", "why"}`` (not judged with its reason, errored, or not in the run)."""
        out = []
        for cid in BATTERY:
            cls = REGISTRY.get(cid)
            if cls is None or cls.applies(ctx.task):
                continue
            res = ctx.results.get(cid)
            if res is None:
                out.append({"check": cid, "why": "was not run"})
            elif getattr(res, "not_judged", ""):
                out.append({"check": cid, "why": f"was not judged ({str(res.not_judged)[:200]})"})
            elif getattr(res, "status", "") == "error":
                out.append({"check": cid, "why": f"errored ({str(getattr(res, 'reason', ''))[:200]})"})
        return out

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
