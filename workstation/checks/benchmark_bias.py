"""``benchmark-bias``: the author's benchmark against kws's measurement, and its source."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from workstation.analysis.timingstats import consistent_with, log_distance, noise
from workstation.checks.support.benchsource import BenchIssue, TimedUse, scan_bench
from workstation.checks.support.timing import CaseTiming, Measurement, measure, plan
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.timing import (
    AuthorBenchExtra,
    BenchCCall,
    BenchEvent,
    ClockRead,
    SideCall,
)
from workstation.protocol.steps import AuthorBenchStep
from workstation.task.model import Task

#: two times "match" when within this factor of each other.
MATCH_FACTOR = 1.25
#: a bench whose method lowers the candidate's speedup by up to this factor (fixed timer
#: overhead on a microsecond call) is not reported as biased.
DEFLATE_FACTOR = 1.5
SIDES = ("candidate", "baseline")


@dataclass
class SideTrace:
    """What the author's bench did to one side, from the child's trace.

    ``calls_ms``: every call of the side's entry function (host wall time), in order;
    ``intervals_ms``: the author's timed intervals (start to stop clock read) that hold
    calls of this side; ``inside_ms``: the side's own call time inside each interval;
    ``extra_work``: other calls the bench made inside those intervals, counted;
    ``first_call_timed``: the side's first call lies inside a timed interval;
    ``args``: the first call's arguments (shape, dtype, stride, device), as evidence holds
    them.
    """

    calls_ms: list[float] = field(default_factory=list)
    intervals_ms: list[float] = field(default_factory=list)
    inside_ms: list[float] = field(default_factory=list)
    extra_work: Counter[str] = field(default_factory=Counter)
    first_call_timed: bool = False
    args: list[Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        med = (lambda xs: float(np.median(xs)) if xs else None)  # noqa: E731
        return {"calls": len(self.calls_ms), "first_call_ms": self.calls_ms[0] if self.calls_ms else None,
                "call_median_ms": med(self.calls_ms[1:] or self.calls_ms), "timed_intervals": len(self.intervals_ms),
                "interval_median_ms": med(self.intervals_ms),
                "interval_mean_ms": float(np.mean(self.intervals_ms)) if self.intervals_ms else None,
                "inside_median_ms": med(self.inside_ms), "extra_work_per_interval": dict(self.extra_work),
                "first_call_timed": self.first_call_timed, "args": self.args}


def analyse_trace(events: list[BenchEvent], uses: list[TimedUse]) -> dict[str, SideTrace]:
    """Pair the author's clock reads into timed intervals and attribute them to sides.

    A start read is one on a line where the source scan found a region's start clock and
    its stop is the next read on that region's stop line; without such lines (or with
    no match), consecutive reads form intervals. An interval belongs to the side(s)
    whose calls started inside it.
    """
    out = {s: SideTrace() for s in SIDES}
    calls = [(e, e.t_end) for e in events if isinstance(e, SideCall) and e.side in SIDES and e.t_end is not None]
    for e, t_end in calls:
        st = out[e.side]
        st.calls_ms.append((t_end - e.t) / 1e6)
        if st.args is None and e.args is not None:
            st.args = msgspec.to_builtins(e.args)
    clocks = [e for e in events if isinstance(e, ClockRead) and e.in_bench]
    pairs = {u.clock_lines for u in uses if u.clock_lines[0] and u.clock_lines[1]}
    intervals: list[tuple[int, int]] = []
    if pairs:
        starts = {a for a, _ in pairs}
        stop_of: dict[int, set[int]] = {}
        for a, b in pairs:
            stop_of.setdefault(a, set()).add(b)
        i = 0
        while i < len(clocks):
            c = clocks[i]
            if c.line in starts:
                j = next((k for k in range(i + 1, len(clocks)) if clocks[k].line in stop_of[c.line]), None)
                if j is not None:
                    intervals.append((c.t, clocks[j].t))
                    i = j + 1 if clocks[j].line not in starts else j
                    continue
            i += 1
    if not intervals:
        intervals = [(clocks[k].t, clocks[k + 1].t) for k in range(len(clocks) - 1)]
    first_t = {s: min((e.t for e, _ in calls if e.side == s), default=None) for s in SIDES}
    others = [e for e in events if isinstance(e, BenchCCall)]
    for t0, t1 in intervals:
        inside = [(e, t_end) for e, t_end in calls if t0 <= e.t < t1]
        sides = {e.side for e, _ in inside}
        if len(sides) != 1:
            continue
        (side,) = sides
        st = out[side]
        st.intervals_ms.append((t1 - t0) / 1e6)
        st.inside_ms.append(sum(min(t_end, t1) - e.t for e, t_end in inside) / 1e6)
        for o in others:
            if t0 <= o.t < t1 and o.name not in ("list.append", "getattr"):
                st.extra_work[o.name] += 1
        first = first_t[side]
        if first is not None and t0 <= first < t1:
            st.first_call_timed = True
    n = {s: max(1, len(out[s].intervals_ms)) for s in SIDES}
    for s in SIDES:
        out[s].extra_work = Counter({k: round(v / n[s], 2) for k, v in out[s].extra_work.items()})
    return out


def _arg_sig(args: list[Any] | None) -> list[tuple[Any, ...]]:
    return [(tuple(a.get("shape", ())), a.get("dtype")) for a in (args or []) if "shape" in a]


@register
class BenchmarkBias(Check):
    """The author's benchmark is unfair: warm against cold cache, no synchronize, compile
    or autotune time on one side only, different inputs, shapes or dtypes between sides,
    different statistics per side, timing utilities used against their documentation.

    Catches:
        an author's benchmark (`[entry] bench`, `run(case, device) ->
        {"candidate_ms", "baseline_ms"}`) that treats the two sides differently, or times them
        in ways the timing tools' own documentation warns against.

    How:
        1. *Source* (`workstation/checks/support/benchsource.py`, `ast` only): finds where each side is timed:
           host clock pairs (`t0 = time.perf_counter()` ... `time.perf_counter() - t0`, also
           `perf_counter_ns`, `time.time`, `monotonic`, `process_time`, `timeit.default_timer`),
           CUDA event pairs, `triton.testing.do_bench`, `torch.utils.benchmark.Timer`, directly
           or through helper functions that receive the side as an argument (lambdas,
           `functools.partial`); which side a call is (imports of the entry files, `importlib`
           by path, names bound to them); and on which device path (`if device.type ==
           "cuda"` branches, early returns). Each defect it finds is a finding of its kind (the
           table below).

        2. *Run*: where the sides are not Triton code under the interpreter, kws runs the
           author's `run(case, device)` in an exclusive child on the case it times itself
           (`[benchmark]` cases, else the largest declared case), traced with `sys.setprofile`
           (`workstation/harness/authorbench.py`): every call of either side's entry function
           (duration, argument shapes and dtypes), every clock read and its line, the bench's
           own C calls in between (`Tensor.clone`...). The author's ratio baseline_ms /
           candidate_ms is compared with kws's cold and warm intervals (`docs/timing.md`). Outside
           them (and a 10% margin), kws asks whether the bench's *method* explains it: a
           one-sided defect in the source, different argument shapes or dtypes, or (on the CPU,
           where calls are synchronous) the author's ratio departing by more than 1.25x from the
           ratio of the side calls as the bench itself ran them (`traced_ratio`, medians without
           first calls; the bench runs twice, untraced for the numbers compared with kws's and
           traced for this, since the profiler slows Python-heavy sides). Then it is `fail`
           (`warn` when the method works against the candidate by more than 1.5x: fixed timer
           overhead on a microsecond candidate is allowed that much),
           with the author's number for each side decomposed against kws's warm, cold and
           first-call medians: the side's own call as the bench ran it, work timed with it, the
           first call timed without warm-up, the statistic (mean against median), different
           argument shapes or dtypes; the largest factor is named. When the author's number
           matches kws's cold first-call time, the summary says so ("the author's baseline_ms
           includes the first call: kws's cold first-call time for the baseline is X ms, which
           matches the author's Y ms"). When the bench's numbers follow its own calls and its
           source shows nothing one-sided, the two runs differ (machine load, cache state), not
           the method: `info`. On CUDA, where host call times are launch times, there is no
           traced ratio and a discrepancy is `fail`.

    Findings:
        | finding | severity |
        |---|---|
        | `no-sync`: a host clock around CUDA work with no `torch.cuda.synchronize()` / `event.synchronize()` / `.item()` in the region (CUDA path only; a bench helper that synchronises counts) | `fail` when one side only, else `warn` |
        | `first-call-timed`: a single timed call with no warm-up before it (with `torch.compile`: the compile is timed) | `fail` one side, `warn` both |
        | `no-warmup`: repeated timed calls whose first one is the cold first call | `fail` one side, `warn` both |
        | `do-bench-one-side`, `method-differs`: the sides timed with different methods | `fail` |
        | `flush-one-side`: a cache flush (`<cache>.zero_()`, `clear_cache`, `do_bench`) before one side's timed runs only | `fail` |
        | `setup-in-timed-region`: other work timed with one side's call (`x.clone()`, input construction) | `fail` |
        | `fresh-inputs-one-side`: one side gets new inputs before every timed call, the other reuses one set (cold against warm data) | `fail` |
        | `inputs-differ`: the sides are called on different inputs (after stripping `.clone()`-like calls), with the lines that build them | `fail` |
        | `aggregate-differs`: `candidate_ms` and `baseline_ms` are different statistics (median against mean...) | `fail` |
        | `timer-misuse`: `time.time()` (the docs recommend `perf_counter`), `do_bench(...) * 1000` (it returns ms), `do_bench(rep=3)` (ms, not a count), `Measurement.raw_times` (per-block totals), `Timer.timeit(1)`, `Timer(num_threads=...)` | `warn` |
        | a one-sided defect above where kws ran the bench on that device path and the author's numbers still agree with kws's | `warn` |
        | the author's ratio outside kws's intervals (and a 10% margin) and the bench's method explains it (a one-sided defect, different argument shapes or dtypes, the traced ratio departing by more than 1.25x), with the per-side decomposition and the largest factor named; on CUDA any such discrepancy | `fail` |
        | the same, where the method works against the candidate by more than 1.5x | `warn` |
        | the author's numbers differ from kws's but follow the bench's own calls, and its source shows nothing one-sided (the runs differ, not the method) | `info` |

    Example:
        (sample task `bench-biased`): the baseline's timed region also clones `x`
        and `residual`, it gets a fresh batch every step with no warm-up, and is reported as a
        mean while the candidate is warmed, reuses its inputs and is reported as a median: five
        `fail` findings, the last decomposing the author's 3x against kws's ~1.2-1.4x.

    Source:
        the benchmarking pitfalls the tools' own documentation warns about
        (`triton.testing.do_bench`: warm-up, L2 flush, milliseconds; `torch.utils.benchmark`:
        warm-up, synchronisation, replicates; Python's `time`: `perf_counter` for benchmarks)
        and Hoefler & Belli, "Scientific Benchmarking of Parallel Computing Systems", SC 2015.

    Limits:
        the source scan follows names, lambdas, `partial` and helper functions one
        level deep, not arbitrary data flow. On the CPU, the CUDA paths of a bench are judged
        from the source only; under the Triton interpreter the bench of a Triton task is not run
        (its timings say nothing about GPU speed, its GPU-sized cases would not finish).
        `skip` when the task has no `[entry] bench`.

    Not judged when:
        kws could not time any case, or the author's bench died or raised on it: the
        author's numbers were not compared; not judged, with the static reading still
        reported. On the CPU (Triton interpreter) the bench is not run by design (timing
        there says nothing about the GPU): `info`, documented in Limits. When the author's
        numbers agree with a kws measurement too noisy to decide (`timingstats.noise`: a
        95% interval more than 50% wide or more than 25% of samples descheduled), the
        one-sided defects stay `warn` and the check is not judged: agreement with a
        measurement that could not tell says nothing about the bias.

    Forgeable:
        Measured in the job process: the timing step's timers and CUDA events in the job process.
        Still forgeable from inside: the timer functions are watched; a candidate that slows the other side it is compared with (the baseline runs in the same timing process by design).
    """

    id = "benchmark-bias"
    order = 18
    title = "The author's benchmark vs kws's"
    phase = "exclusive"

    @classmethod
    def skip_reason(cls, task: Task) -> str:
        return "" if "bench" in task.entry else "the task has no [entry] bench (the author's benchmark)"

    def run(self, ctx: CheckContext) -> list[Finding]:
        task = ctx.task
        uses, issues = scan_bench(task)
        bench_file = task.entry["bench"].file
        p = plan(ctx)
        findings: list[Finding] = []
        dyn: dict[str, Any] | None = None
        dyn_note = ""
        if p.representative:
            m = measure(ctx)
            ct = next((c for c in m.cases if c.ok), None)
            if ct is None:
                dyn_note = "kws could not time the case, so the author's numbers are not compared"
                ctx.could_not_judge(dyn_note)
            else:
                dyn = self._dynamic(ctx, m, ct, uses)
                if dyn.get("error"):
                    dyn_note = dyn["error"]
                    # the bench died, raised or returned no usable numbers: nothing compared
                    ctx.could_not_judge(dyn_note[:300])
        else:
            dyn_note = f"the author's bench was not run: {p.reason}; the source alone is judged"
        consistent_here = bool(dyn and dyn.get("consistent"))
        if consistent_here and dyn is not None and any(i.asymmetric for i in issues):
            ct_ = dyn["ct"]
            busy = dyn["timing"].descheduled(ct_)
            noisy = noise(ct_.ratio, max(busy.values()) if busy else 0.0)
            if noisy:  # agreement with a measurement that could not tell says nothing
                ctx.could_not_judge("kws's timing is too noisy here to tell whether the bench's asymmetries bias the "
                                     f"author's numbers ({'; '.join(noisy)})")
        device_path = "cuda" if ctx.on_gpu else "cpu"
        for iss in issues:
            sev = "warn"
            if iss.asymmetric:
                sev = "fail"
                if consistent_here and iss.path in (device_path, "any"):
                    sev = "warn"
            ev = {"issue": iss.as_dict(), "source": {"file": bench_file, "line": iss.line}}
            where = f" ({'CUDA path' if iss.path == 'cuda' else 'CPU path' if iss.path == 'cpu' else 'every device'})"
            tail = ""
            if sev == "warn" and iss.asymmetric:
                tail = "; here the author's numbers still agree with kws's"
            findings.append(self.finding(ctx, sev, f"{bench_file}:{iss.line}: {iss.message}{where}{tail}", ev))
        if dyn is not None and not dyn.get("error"):
            findings.append(self._dynamic_finding(ctx, dyn, issues, bench_file))
        elif dyn_note:
            sev = (dyn or {}).get("error_severity", "info")
            findings.append(self.finding(ctx, sev, dyn_note, {"uses": [u.as_dict() for u in uses]}))
        if not issues:
            sides = sorted({u.side for u in uses})
            findings.append(self.finding(
                ctx, "info", f"{bench_file}: read {len(uses)} timed use(s) of {', '.join(sides) or 'no side'}; "
                "no warm-up, synchronize, flush, input or statistic asymmetry found",
                {"uses": [u.as_dict() for u in uses], "source": {"file": bench_file, "line": 1}}))
        return findings

    # -- dynamic ---------------------------------------------------------------------

    def _dynamic(self, ctx: CheckContext, m: Measurement, ct: CaseTiming, uses: list[TimedUse]) -> dict[str, Any]:
        """Run the author's bench twice, each in a fresh exclusive child (as the author
        would: first calls are first calls): untraced (the numbers kws compares with its
        own) and traced (the decomposition; the tracer slows Python-heavy sides, so the
        traced run is only compared with its own trace)."""
        jobs = [ctx.run_job([AuthorBenchStep(case=ct.case, baseline_role=m.plan.baseline_role, trace=tr)],
                            exclusive=True, step_timeout=120.0) for tr in (False, True)]
        tail = "; the source alone is judged"
        runs = []
        for job in jobs:
            st = job.steps[0] if job.steps else None
            if st is None:
                return {"error": f"the author's bench {job.describe_death()} on case {case_label(ct.case)}{tail}",
                        "error_severity": "info"}
            if not st.ok:
                err = st.error
                return {"error": f"the author's bench raised {err.type if err else None}: "
                                 f"{(err.message if err else '')[:300]} "
                                 f"on case {case_label(ct.case)} ({m.device_text()}){tail}", "error_severity": "info"}
            res = extra_as(st.extra, AuthorBenchExtra).result
            a_c, a_b = res.get("candidate_ms"), res.get("baseline_ms")
            if not (isinstance(a_c, float) and isinstance(a_b, float)
                    and all(x > 0 and math.isfinite(x) for x in (a_c, a_b))):
                return {"error": f"the author's bench returned {res!r}, not positive candidate_ms and baseline_ms "
                                 "(task format: run(case, device) -> {\"candidate_ms\", \"baseline_ms\"})",
                        "error_severity": "warn"}
            runs.append({"candidate_ms": a_c, "baseline_ms": a_b, "ratio": a_b / a_c})
        plain, traced_run = runs
        traced = jobs[1].steps[0]
        assert traced is not None  # every job returned above when its step is missing
        trace = analyse_trace(extra_as(traced.extra, AuthorBenchExtra).events, uses)
        cons = any(r is not None and consistent_with(plain["ratio"], r) for r in (ct.ratio, ct.cold_ratio, ct.warm_ratio))
        return {"author": plain, "author_traced": traced_run, "trace": trace, "consistent": cons, "timing": m,
                "ct": ct}

    def _dynamic_finding(self, ctx: CheckContext, dyn: dict[str, Any], issues: list[BenchIssue],
                         bench_file: str) -> Finding:
        m: Measurement = dyn["timing"]
        ct: CaseTiming = dyn["ct"]
        a = dyn["author"]
        trace: dict[str, SideTrace] = dyn["trace"]
        r = ct.ratio
        assert r is not None
        label = case_label(ct.case)
        ev: dict[str, Any] = {
            "case": ct.case, "author": a, "kws": {"ratio": r.ratio, "ratio_ci": r.as_list(), "primary": ct.primary},
            "trace": {s: t.as_dict() for s, t in trace.items()},
        }
        if not ctx.task.claims.speedup:  # else speedup-claim's finding carries the timing panel's evidence
            ev["timing"] = m.evidence(ct, 0.0)
        for name, rr in (("cold", ct.cold_ratio), ("warm", ct.warm_ratio)):
            if rr is not None:
                ev["kws"][f"{name}_ratio"], ev["kws"][f"{name}_ratio_ci"] = rr.ratio, rr.as_list()
        head = (f"case {label}: the author's bench reports {a['ratio']:.3g}x (baseline {a['baseline_ms']:.4g} ms, "
                f"candidate {a['candidate_ms']:.4g} ms); kws measures {r.ratio:.3g}x [{r.lo:.3g}, {r.hi:.3g}] "
                f"({ct.primary} cache, 95% CI)")
        sig = {s: _arg_sig(trace[s].args) for s in SIDES}
        if sig["candidate"] and sig["baseline"] and sig["candidate"] != sig["baseline"]:
            ev["inputs_differ"] = {s: [list(x) for x in sig[s]] for s in SIDES}
        if dyn["consistent"] and "inputs_differ" not in ev:
            return self.finding(ctx, "info", head + ": consistent", ev, case=ct.case)
        # the ratio of the side calls as the bench ran them (medians, first calls left
        # out): what a fair reading of the author's own run gives. On the CPU calls are
        # synchronous, so their host durations are their times; on CUDA they are launches.
        traced = None
        if not ctx.on_gpu:
            med = {s: float(np.median(trace[s].calls_ms[1:])) for s in SIDES if len(trace[s].calls_ms) >= 3}
            if len(med) == 2 and med["candidate"] > 0:
                traced = med["baseline"] / med["candidate"]
                ev["traced_ratio"] = traced
        asym = [i for i in issues if i.asymmetric]
        at = dyn["author_traced"]  # the traced run's own numbers, against its own calls
        ev["author_traced"] = at
        distortion = at["ratio"] / traced if traced else None
        # the method's own distortion: in the candidate's favour beyond 1.25x is evidence of
        # bias; against it (fixed timer overhead on a microsecond candidate) up to 1.5x is not
        if traced is not None and distortion is not None and not asym and "inputs_differ" not in ev \
                and 1 / DEFLATE_FACTOR <= distortion <= MATCH_FACTOR:
            return self.finding(
                ctx, "info", head + f": in a traced run the bench reported {at['ratio']:.3g}x and its own calls gave "
                f"{traced:.3g}x (its numbers follow its calls: the timing method adds {distortion - 1:+.0%}), so the "
                "difference to kws is between runs (machine load, cache state), not in the bench's method", ev,
                case=ct.case)
        parts = []
        if traced is not None:
            parts.append(f"in a traced run its own calls give {traced:.3g}x and its timing method turns that into "
                         f"{at['ratio']:.3g}x ({distortion:.2f}x)")
        if "inputs_differ" in ev:
            parts.append("the sides were called on different inputs: " + "; ".join(
                f"{s} {', '.join(f'{list(sh)} {dt}' for sh, dt in sig[s])}" for s in SIDES))
        # decomposed on the traced run: its numbers and its trace describe the same calls
        expl = {s: self._explain_side(s, a[f"{s}_ms"], at[f"{s}_ms"], ct, trace[s]) for s in SIDES}
        ev["explanation"] = {s: e for s, e in expl.items() if e}
        worst = max(SIDES, key=lambda s: log_distance(at[f"{s}_ms"], ct.sides[s].median_ms) if s in ct.sides else 0)
        if expl.get(worst):
            parts.append(expl[worst]["text"])
        other = "candidate" if worst == "baseline" else "baseline"
        if expl.get(other) and expl[other].get("factor", 1.0) >= MATCH_FACTOR:
            parts.append(expl[other]["text"])
        if asym:
            ev["source_issues"] = [i.as_dict() for i in asym]
            ev["source"] = {"file": bench_file, "line": asym[0].line}
        parts = [x for x in parts if x]
        summary = head + ": " + "; ".join(parts) if parts else head
        # fail on evidence of method (a one-sided defect in the source, different inputs,
        # or the bench's numbers departing from its own calls); otherwise the runs differ
        sev = "fail"
        if not asym and "inputs_differ" not in ev and distortion is not None and distortion < 1.0:
            sev = "warn"  # the method deflates the candidate's speedup: unfair, but not to its credit
            summary += "; no one-sided defect in the source"
        return self.finding(ctx, sev, summary, ev, case=ct.case)

    @staticmethod
    def _explain_side(side: str, plain_ms: float, traced_ms: float, ct: CaseTiming, t: SideTrace) -> dict[str, Any]:
        """Explain the author's number for one side (see class doc): ``plain_ms`` from the
        untraced run, matched against kws's figures when the trace has too few intervals
        to decompose; else ``traced_ms`` from the traced run, decomposed with its trace."""
        st = ct.sides.get(side)
        if st is None:
            return {}
        author_ms = plain_ms
        k_warm = float(np.median(ct.warm[side])) if ct.warm.get(side) else math.nan
        k_cold = float(np.median(ct.cold[side])) if ct.cold.get(side) else math.nan
        k_first = st.first_call_ms or math.nan
        kws = st.median_ms
        factor = author_ms / kws if kws > 0 else math.nan
        out: dict[str, Any] = {"author_ms": author_ms, "kws_median_ms": kws, "kws_warm_ms": k_warm,
                               "kws_cold_ms": k_cold, "kws_first_call_ms": k_first, "factor": factor}
        close = {"kws's warm median": k_warm, "kws's cold median": k_cold, "kws's cold first-call time": k_first}
        best = min(close, key=lambda k: log_distance(author_ms, close[k]))
        out["closest"] = best
        # a match with one of kws's figures explains a number the trace cannot decompose
        # (one or two timed intervals: a single timed call, do_bench on a GPU)
        if len(t.intervals_ms) < 3 and log_distance(author_ms, close[best]) <= math.log(MATCH_FACTOR) \
                and best != "kws's warm median" and factor >= MATCH_FACTOR:
            out["text"] = (f"the author's {side}_ms ({author_ms:.4g} ms) matches {best} for the {side} "
                           f"({close[best]:.4g} ms), not its warm steady state ({k_warm:.4g} ms)")
            if best == "kws's cold first-call time":
                out["text"] = (f"the author's {side}_ms includes the first call: {best} for the {side} is "
                               f"{k_first:.4g} ms, which matches the author's {author_ms:.4g} ms")
            return out
        if abs(math.log(factor)) < math.log(MATCH_FACTOR) or not t.intervals_ms:
            out["text"] = (f"the author's {side}_ms is {author_ms:.4g} ms against kws's {kws:.4g} ms "
                           f"({ct.primary} median)") if abs(math.log(factor)) >= math.log(MATCH_FACTOR) else ""
            return out
        tracer = traced_ms / plain_ms  # how much the trace itself slowed this side's number
        author_ms = traced_ms
        out["traced_ms"], out["tracer_slowdown"] = traced_ms, tracer
        iv_med = float(np.median(t.intervals_ms))
        iv_mean = float(np.mean(t.intervals_ms))
        inside = float(np.median(t.inside_ms)) if t.inside_ms else iv_med
        call_med = float(np.median(t.calls_ms[1:] or t.calls_ms))
        stat = "mean" if log_distance(author_ms, iv_mean) < log_distance(author_ms, iv_med) else "median"
        factors = {
            "statistic": author_ms / iv_med,
            "work timed with the call": iv_med / inside if inside > 0 else 1.0,
            "the call as the bench ran it": inside / kws if kws > 0 else 1.0,
        }
        out["factors"] = factors
        out["statistic"] = stat
        segs = [f"the author's {side}_ms is {plain_ms:.4g} ms, {factor:.2f}x kws's {kws:.4g} ms ({ct.primary} "
                f"median; first call {k_first:.4g} ms); in the traced run ({traced_ms:.4g} ms)"]
        if factors["work timed with the call"] >= 1.1:
            work = ", ".join(f"{k} x{v:g}" for k, v in t.extra_work.most_common(4)) or "other work"
            segs.append(f"{iv_med - inside:.3g} ms of each timed interval ({iv_med:.4g} ms) is not the {side} but "
                        f"{work} timed with it")
        if factors["statistic"] >= 1.1:
            first = " and its first call is timed with no warm-up" if t.first_call_timed else ""
            segs.append(f"the reported number is the {stat} of {len(t.intervals_ms)} intervals{first} "
                        f"({t.calls_ms[0]:.4g} ms first call vs {call_med:.4g} ms median), "
                        f"{factors['statistic']:.2f}x their median")
        if factors["the call as the bench ran it"] >= 1.1:
            why = "inputs remade or not in cache between calls"
            if tracer >= 1.1:
                why += f"; the trace itself slowed this side {tracer:.2f}x"
            segs.append(f"the {side} call itself took {inside:.4g} ms as the bench ran it vs kws's {kws:.4g} ms "
                        f"({why})")
        main = max(factors, key=lambda k: factors[k])
        out["main_factor"] = main
        out["text"] = ", ".join(segs[:1]) + (": " + "; ".join(segs[1:]) if len(segs) > 1 else "") + \
            f" [largest factor: {main}, {factors[main]:.2f}x]"
        return out
