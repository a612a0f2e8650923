"""``nondeterminism``: equal inputs give different outputs across runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from workstation import settings
from workstation.analysis.compare import is_float, ulp_distance
from workstation.checks.support.guarded import indices, where_text
from workstation.checks.support.static import scan_hash_order
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, NotJudged, Skip, register
from workstation.engine.context import CallOutcome, CheckContext, case_label, step_timeout_s
from workstation.engine.report import json_scalar
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.probes import HashseedCallExtra, RepeatCallExtra
from workstation.protocol.results import TensorMeta
from workstation.protocol.steps import HashseedCallStep, RepeatCallStep
from workstation.protocol.wire import TensorData

#: calls in one process (CPU / GPU).
REPEATS_CPU = 3
REPEATS_GPU = 5
#: PYTHONHASHSEED of the fresh interpreter (the fork server's own seed is random).
FRESH_HASHSEED = 0


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elements whose encodings differ bitwise (NaN vs NaN equal, +0 vs -0 differ)."""
    if a.dtype.kind not in "fc":
        return a != b
    with np.errstate(invalid="ignore"):
        same = ((a == b) & (np.signbit(a.real) == np.signbit(b.real))) | (np.isnan(a) & np.isnan(b))
    return ~same


@register
class Nondeterminism(Check):
    """Equal inputs give different outputs across runs (where ``deterministic = true``).

    Catches:
        equal inputs giving bitwise-different outputs where the contract says
        `deterministic = true`: atomics in split-K / stream-K reductions, combine orders that come
        from thread completion, `id()`-ordered sets (object addresses) or sets of strings (ordered by the str hash seed).

    How:
        on the first declared case and seed the candidate runs 3 times in one process (5
        on a GPU), each on a fresh clone of the same inputs; once in a separate forked process (the
        run `correctness` made); and once in a fresh Python interpreter started with
        `PYTHONHASHSEED=0`: forked children share the fork server's hash seed, so a result that
        depends on str/bytes hash order differs only across interpreters. The hash seed reaches
        task code through set/frozenset iteration order (dicts keep insertion order; a dict's keys
        view minus another is a set) or `hash()`, in the task's code or a library's: the fresh
        interpreter (~2 s of CPU for torch and triton) always runs; the set/hash sites a static
        scan reads in the candidate's file and the task modules it imports are evidence only. Every run is compared
        bitwise with the first (NaN equals NaN; +0 and -0 differ), with differing elements' count,
        places and size in ULPs of the output dtype.

    Findings:
        | finding | severity |
        |---|---|
        | runs differ: which pair, how many elements, where, max abs, max/median ULP, first element's two values | `fail` |
        | one kind of run failed where others returned (behaviour that depends on how it is called) | `warn`, not judged |
        | all runs bitwise equal (which runs) | `info` |
        | `deterministic = false` in the contract | `skip` (reason says so) |

    Example:
        (`sum-splitk-nondet`): `case T=2048 N=256 float32 (seed 0) output 0: 157 of 256
        elements differ bitwise between call 1 of 3 in one process and call 2 of 3 in one process
        on equal inputs (max abs 1.53e-05, max 40 ULP; ...)`.

    Source:
        split-K / stream-K reductions with `tl.atomic_add` (float addition is not
        associative, and the order in which programs add is a scheduling accident), as in
        PyTorch's documented nondeterministic ops (`torch.use_deterministic_algorithms`).

    Limits:
        the Triton interpreter runs program instances one after another, so atomics
        are ordered on the CPU and scheduling-dependent nondeterminism shows only on a GPU; on the
        CPU the check finds state-, address-, thread- and hash-order-dependent results. Hash-order
        dependence inside libraries the candidate calls (not task code) is not looked for.

    Not judged when:
        fewer than two of the runs returned (each failure named), the candidate's backend or a
        library it imports cannot run here, `make_inputs` is broken on the case, or any of the runs
        (the fresh interpreter included) was stopped by a limit that says nothing about the code:
        `NotJudged` for the whole check. A run that raised where another returned is a `warn` tagged
        `observation`, and the check is not judged (the run that raised compared nothing); one
        that died or hung is charged to the candidate (`fail`). Not a limit of this run (`info`):
        scheduling-dependent nondeterminism on the CPU (the interpreter orders atomics; evidence
        `scheduling_examined: false`).

    Forgeable:
        Measured in the job process: outputs of repeated calls and fresh interpreters.
        Still forgeable from inside: a candidate that detects repetition (a call counter kept outside the watched modules) could return a cached output.
    """

    id = "nondeterminism"
    order = 9
    title = "Bitwise repeatability"

    def run(self, ctx: CheckContext) -> list[Finding]:
        if not ctx.task.contract.deterministic:
            raise Skip("the contract says deterministic = false: equal inputs may give different outputs")
        case, seed = ctx.cases[0], ctx.seeds[0]
        n = REPEATS_GPU if ctx.on_gpu else REPEATS_CPU
        rep = RepeatCallStep(role="candidate", case=dict(case), seed=seed, n=n)
        fresh = HashseedCallStep(role="candidate", case=dict(case), seed=seed, hashseed=FRESH_HASHSEED)
        hash_sites = scan_hash_order(ctx.sources, ctx.task.entry["candidate"].file)
        with ThreadPoolExecutor(max_workers=3) as ex:
            f_rep = ex.submit(ctx.calls, [rep], memo=True)
            # always: the hash seed reaches work through more than a static scan can read
            # (dict views' set operations, a library's sets, hash() of a str in a key)
            # a budget of kws's own: the fresh interpreter imports torch, triton and the task's
            # modules again inside the step (a heavy import is no hang of the call; a stop here
            # is not charged to the candidate)
            fresh_budget = step_timeout_s() + settings.current().import_budget
            f_fresh = ex.submit(ctx.run_steps, [fresh], step_timeout=fresh_budget, budget=True)
            plain = ctx.candidate([(case, seed)])[0]
            rep_out = f_rep.result()[0]
            fresh_out = f_fresh.result()[0]
        runs: list[tuple[str, list[TensorData]]] = []
        failures: list[tuple[str, CallOutcome]] = []
        if rep_out.ok and rep_out.step is not None:
            rep_st = rep_out.step
            for k, run in enumerate(extra_as(rep_st.extra, RepeatCallExtra).runs):
                outs = [_td(rep_st.arrays[f"r{k}_{j}"], m) for j, m in enumerate(run.outputs)]
                runs.append((f"call {k + 1} of {n} in one process", outs))
        else:
            failures.append((f"{n} calls in one process", rep_out))
        if plain.ok:
            runs.append(("a call in a separate forked process", plain.outputs))
        else:
            failures.append(("a call in a separate forked process", plain))
        if fresh_out.ok and fresh_out.step is not None:
            hash_note = (f"hash-seed run: {len(hash_sites)} set/hash site(s) read in the sources, e.g. "
                         f"{hash_sites[0]['file']}:{hash_sites[0]['line']}" if hash_sites else
                         "hash-seed run: no set/hash site read in the sources (the run looks all the same)")
            fresh_st = fresh_out.step
            metas = extra_as(fresh_st.extra, HashseedCallExtra).outputs
            runs.append((f"a call in a fresh interpreter (PYTHONHASHSEED={FRESH_HASHSEED})",
                         [_td(fresh_st.arrays[f"h{j}"], m) for j, m in enumerate(metas)]))
        elif fresh_out.budget or fresh_out.unjudged:
            hash_note = f"the fresh-interpreter run was stopped by kws's budget ({fresh_out.death or fresh_out.unjudged})"
            ctx.could_not_judge(f"case {case_label(case)}: {hash_note}; results across hash seeds not compared")
        else:
            hash_note = "the fresh-interpreter run failed"
            failures.append(("a call in a fresh interpreter", fresh_out))
        findings: list[Finding] = []
        if len(runs) < 2:
            why = "; ".join(f"{w}: {o.failure_text()}" for w, o in failures)
            raise NotJudged(f"fewer than two runs of case {case_label(case)} returned ({why})")
        base_label, base = runs[0]
        diffs: list[dict[str, Any]] = []
        for label, outs in runs[1:]:
            for j, (e, g) in enumerate(zip(base, outs, strict=False)):
                if e.shape != g.shape or e.dtype != g.dtype:
                    diffs.append({"run": label, "output": j, "reason": f"shape/dtype {g.dtype} {list(g.shape)} vs "
                                  f"{e.dtype} {list(e.shape)}", "n": int(max(e.values.size, 1))})
                    continue
                d = differing(e.values, g.values)
                if d.any():
                    diffs.append(self._diff(label, j, e, g, d))
        for label, out in failures:
            if out.ok:
                continue
            if plain.ok or rep_out.ok:
                text = (f"case {case_label(case)} (seed {seed}): {label}: the candidate {out.failure_text()} where "
                        "other runs on equal inputs returned")
                findings.append(self.finding(
                    ctx, "warn", text, {"case": case, "seed": seed, **out.failure_evidence(),
                                        **suspect(ctx, "observation", text)}, case=case, seed=seed))
        if diffs:
            d0 = diffs[0]
            more = f"; {len(diffs) - 1} more run/output pair(s) differ" if len(diffs) > 1 else ""
            if "reason" in d0:
                summary = (f"case {case_label(case)} (seed {seed}) output {d0['output']}: {d0['run']} returns "
                           f"{d0['reason']} on equal inputs{more}")
            else:
                ulp = f", max {d0['max_ulp']:.3g} ULP" if d0.get("max_ulp") is not None else ""
                summary = (f"case {case_label(case)} (seed {seed}) output {d0['output']}: {d0['n']} of "
                           f"{d0['elements']} elements differ bitwise between {base_label} and {d0['run']} on "
                           f"equal inputs (max abs {d0['max_abs']:.3g}{ulp}; {d0['where']}); first at "
                           f"{d0['first']['index']}: {d0['first']['a']!r} vs {d0['first']['b']!r}{more}")
            findings.append(self.finding(ctx, "fail", summary,
                                         {"case": case, "seed": seed, "baseline_run": base_label, "differences": diffs,
                                          "runs": [lbl for lbl, _ in runs], "hash_seed": hash_note,
                                          "hash_sites": hash_sites[:8]}, case=case, seed=seed))
        else:
            findings.append(self.finding(
                ctx, "info",
                f"bitwise equal: {len(runs)} runs of case {case_label(case)} (seed {seed}): "
                + "; ".join(lbl for lbl, _ in runs) + f"; {hash_note}",
                {"case": case, "seed": seed, "runs": [lbl for lbl, _ in runs], "hash_seed": hash_note,
                 "hash_sites": hash_sites[:8], "scheduling_examined": ctx.on_gpu}, case=case, seed=seed))
        return findings

    @staticmethod
    def _diff(label: str, j: int, e: TensorData, g: TensorData, d: np.ndarray) -> dict[str, Any]:
        ev, gv = e.values[d], g.values[d]
        with np.errstate(invalid="ignore"):
            absd = np.abs(gv.astype(np.float64) - ev.astype(np.float64)) if ev.dtype.kind in "fiu" else None
        ulp = ulp_distance(gv, ev, e.dtype) if is_float(e.dtype) else None
        fin_abs = absd[np.isfinite(absd)] if absd is not None else np.zeros(0)
        fin_ulp = ulp[np.isfinite(ulp)] if ulp is not None else None
        first_ix = indices(d, 1)[0]
        return {
            "run": label, "output": j, "n": int(d.sum()), "elements": int(d.size),
            "indices": indices(d), "where": where_text(d) or "one element",
            "max_abs": float(fin_abs.max()) if fin_abs.size else float("nan"),
            "max_ulp": float(fin_ulp.max()) if fin_ulp is not None and fin_ulp.size else None,
            "median_ulp": float(np.median(fin_ulp)) if fin_ulp is not None and fin_ulp.size else None,
            "first": {"index": first_ix, "a": json_scalar(e.values[tuple(first_ix)]), "b": json_scalar(g.values[tuple(first_ix)])},
        }


def _td(values: np.ndarray, meta: TensorMeta) -> TensorData:
    """One output of a repeated or fresh-interpreter call: its values (shape as sent) and
    the child's metadata."""
    return TensorData(values=values, dtype=meta.dtype, shape=tuple(values.shape), stride=tuple(meta.stride),
                      storage_offset=meta.storage_offset, meta=meta)
