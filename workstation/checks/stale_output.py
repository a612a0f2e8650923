"""``stale-output``: cached, replayed, aliased or lazy results instead of a fresh computation."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from workstation.checks.support.guarded import indices, seed_pair, where_text
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.probes import OutputFacts, StaleCallExtra
from workstation.protocol.steps import StaleCallStep

#: at most this many cases get the refill protocol (first case, then one per other dtype).
MAX_CASES = 2


def stale_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first declared case, then the first case of each further dtype (MAX_CASES)."""
    out, dtypes = [], set()
    for c in cases:
        if c.get("dtype") not in dtypes:
            out.append(c)
            dtypes.add(c.get("dtype"))
    return out[:MAX_CASES]


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality of two encoded outputs, NaN equal to NaN, +0 != -0."""
    if a.shape != b.shape:
        return np.zeros(a.shape, dtype=bool)
    if a.dtype.kind not in "fc":
        return a == b
    with np.errstate(invalid="ignore"):
        return ((a == b) & (np.signbit(a.real) == np.signbit(b.real))) | (np.isnan(a) & np.isnan(b))


@register
class StaleOutput(Check):
    """The candidate returns cached, replayed, aliased or lazy results.

    Catches:
        cached, replayed, aliased or lazy results: a result memoised on operand
        pointers, shapes or `id()` (GPU MODE's leaderboard replay caches), a persistent output
        buffer handed to every caller, an output that is an input's storage or an expanded
        stride-0 view of a smaller result, a meta/fake tensor, a tensor subclass (a lazy
        wrapper that computes on first read), a result computed on a side stream without
        ordering.

    How:
        a `stale_call` step makes the inputs of seed A and calls the candidate, then
        copies seed B's values into the *same* input tensors in place (same storage and
        `data_ptr`) and calls again, keeping the first result alive. The second result must match
        the reference on seed B at the task's tolerance (while a fresh seed-B run does); each
        second output must not share storage with the first call's output (unless it is an
        `out_args`/`inout_args` buffer), must not alias an input (unless the reference's does),
        must be a plain tensor (not `meta`, fake, functional or another subclass) and not have
        stride 0 on a dimension of size > 1 where the reference's output is dense. On a GPU the
        second output is also copied to the host on the current stream before
        `torch.cuda.synchronize()`: a difference from the synchronised value means the work ran
        on another stream without ordering. The reference runs the same protocol, to learn
        whether it aliases. Cases: the first declared case and the first of each other dtype (2).

    Findings:
        | finding | severity |
        |---|---|
        | wrong after the in-place refill (with the fraction bit-identical to the first result: "a replayed result"); same storage / tensor object as the first result (how many elements of the caller's first result changed); input alias; expanded view; not materialised; a tensor subclass other than `Parameter` (named, with its own `__torch_function__`/`__torch_dispatch__`: a lazy or wrapper output); unsynchronised stream | `fail` |
        | the candidate raised only on the second call (behaviour that depends on buffer identity) | `warn`, not judged |
        | fresh results (stream ordering not examined on the CPU) | `info` |

    Example:
        (`gemm-replay-cache`): `after its input buffers were refilled in place with
        seed 1's values, the second call is wrong: 6128 of 6144 elements (99.7%) outside
        atol=0.01, rtol=0.01; ... it is bit-identical to the first call's result (seed 0) at 100%
        of elements: a replayed result ...; the second call returned the very tensor object of the
        first call's output`.

    Source:
        GPU MODE leaderboard replay caches and lazy outputs (kernelboard news 2026-03-09,
        reference-kernels PRs #104, #159-#162); SOL-ExecBench's reward_hack.py (outputs must be
        exactly `torch.Tensor`: no subclass, no fake tensor); PyTorch's stream semantics (work on
        a side stream is not ordered with the current stream without `wait_stream`/events).

    Limits:
        a cache keyed on content is correct by construction and not reported. On the
        CPU there are no streams: the ordering part is not examined (said in the info).

    Not judged when:
        a case was not examined (the reference failed on the second seed, or the candidate
        fails in a plain run too): not judged for those, with the rest reported. Stream
        ordering on the CPU is structurally absent (no CUDA streams): `info`.

    Forgeable:
        Measured in the job process: guard bands and poison in buffers kws allocates, read back by the harness after the call.
        Still forgeable from inside: a candidate that knows kws's sentinel bytes could write them back over what it clobbered before returning.
    """

    id = "stale-output"
    order = 8
    title = "Cached, aliased or lazy results"

    def run(self, ctx: CheckContext) -> list[Finding]:
        a, b = seed_pair(ctx.seeds)
        cases = stale_cases(ctx.cases)
        steps = []
        for c in cases:
            for role in ("candidate", "reference"):
                steps.append(StaleCallStep(role=role, case=dict(c), seed_a=a, seed_b=b))
        runs = ctx.calls(steps, memo=True)
        refs_b = ctx.reference([(c, b) for c in cases])
        plain_b = ctx.candidate([(c, b) for c in cases])
        written = set(ctx.task.out_args) | set(ctx.task.inout_args)
        findings: list[Finding] = []
        checked, skipped = 0, []
        for i, case in enumerate(cases):
            cand, ref_stale = runs[2 * i], runs[2 * i + 1]
            ref_b, p_b = refs_b[i], plain_b[i]
            label = case_label(case)
            if not ref_b.ok:
                skipped.append(f"{label}: the reference failed on seed {b}")
                continue
            if not cand.ok:
                if p_b.ok:
                    text = (f"case {label}: the candidate {cand.failure_text()} on a second call after its input "
                            f"buffers were refilled in place (seed {a} then seed {b}), but returns on fresh inputs")
                    findings.append(self.finding(
                        ctx, "warn", text, {"case": case, "seeds": [a, b], **cand.failure_evidence(),
                                            **suspect(ctx, "state", text)}, case=case, seed=b))
                else:
                    skipped.append(f"{label}: the candidate fails on seed {b} in a plain run (see correctness)")
                continue
            checked += 1
            findings.extend(self._judge(ctx, case, a, b, cand, ref_stale, ref_b, p_b, written))
        if skipped:  # a case this run could not examine is not a case that passed
            ctx.could_not_judge(f"{len(skipped)} case(s) not examined: " + "; ".join(skipped[:3]))
        if not any(f.severity in ("fail", "warn") for f in findings):
            sync = ("; stream ordering not examined on the CPU (no CUDA streams)" if not ctx.on_gpu
                    else "; results equal before and after torch.cuda.synchronize()")
            findings.append(self.finding(
                ctx, "info",
                f"fresh results: after refilling the same input buffers in place (seed {a} -> {b}) the second call "
                f"matches the reference on seed {b} in {checked} case(s); outputs are new, plain, dense tensors "
                f"that alias neither inputs nor the previous result{sync}",
                {"cases": [case_label(c) for c in cases], "seeds": [a, b], "skipped": skipped,
                 "sync_examined": ctx.on_gpu}))
        return findings

    def _judge(self, ctx: CheckContext, case: dict[str, Any], a: int, b: int, cand: CallOutcome,
               ref_stale: CallOutcome, ref_b: CallOutcome, p_b: CallOutcome, written: set[int]) -> list[Finding]:
        label = case_label(case)
        st = cand.step
        assert st is not None  # cand.ok
        facts = extra_as(st.extra, StaleCallExtra).facts
        ref_facts = extra_as(ref_stale.step.extra, StaleCallExtra).facts if ref_stale.step is not None and ref_stale.ok \
            else []
        comps = ctx.compare(ref_b, cand, case)
        plain_comps = ctx.compare(ref_b, p_b, case) if p_b.ok else []
        out: list[Finding] = []
        for j, c in enumerate(comps):
            f = facts[j] if j < len(facts) else OutputFacts()  # no facts: every test below is false
            rf = ref_facts[j] if j < len(ref_facts) else OutputFacts()
            problems: list[str] = []
            ev: dict[str, Any] = {"case": case, "seeds": [a, b], "output": j, "facts": msgspec.to_builtins(f),
                                  "reference_facts": msgspec.to_builtins(rf)}
            severity = "fail"
            got = cand.outputs[j].values if j < len(cand.outputs) else None
            first = st.arrays.get(f"first{j}")
            if not c.ok and j < len(plain_comps) and plain_comps[j].ok:
                same = bitwise_equal(got, first) if got is not None and first is not None else None
                replay = ""
                if same is not None and same.size:
                    frac = float(same.mean())
                    ev["equal_to_first_result"] = frac
                    replay = (f"; it is bit-identical to the first call's result (seed {a}) at "
                              f"{100 * frac:.3g}% of elements: a replayed result" if frac > 0.5 else "")
                w = c.worst or {}
                problems.append(
                    f"after its input buffers were refilled in place with seed {b}'s values, the second call is "
                    f"wrong: {c.reason}; worst at {w.get('index')}: expected {w.get('expected')}, got "
                    f"{w.get('got')}{replay} (fresh inputs of seed {b} give the right result)")
                ev["comparison"] = c.evidence()
            if f.aliases_first_outputs and j not in _written_outputs(written):
                after = st.arrays.get(f"firstafter{j}")
                changed = (~bitwise_equal(first, after)) if first is not None and after is not None else None
                n_ch = int(changed.sum()) if changed is not None else 0
                obj = "the very tensor object" if f.same_object_as_first else "storage"
                held = (f"; the first result, still held by the caller, changed at {n_ch} elements "
                        f"({where_text(changed)})" if n_ch and changed is not None else
                        "; a caller that writes into one result corrupts the other")
                problems.append(f"the second call returned {obj} of the first call's output{held}")
                ev["first_result_changed"] = n_ch
                if changed is not None and n_ch:
                    ev["first_result_changed_at"] = indices(changed)
            if f.aliases_inputs and not written and not rf.aliases_inputs:
                problems.append(f"the output shares storage with input(s) {f.aliases_inputs} (the reference's "
                                f"does not): writing the input later changes the result")
            if f.is_meta or f.fake:
                problems.append(f"the output is not a materialised tensor ({f.type} on {f.device})")
            elif f.plain_tensor is False and not f.type.endswith("Parameter"):
                own = f.overrides or []
                problems.append(f"the output is a tensor subclass ({f.type}), not a plain tensor"
                                + (f"; it defines its own {' and '.join(own)}, so what a reader sees (values, "
                                   f"comparisons) is decided when it is read: a lazy or wrapper output"
                                   if own else "") + " (outputs must be exactly torch.Tensor)")
            if f.zero_stride_dims and not rf.zero_stride_dims:
                problems.append(f"the output is an expanded view (stride 0 on dim(s) {f.zero_stride_dims}, "
                                f"strides {f.stride}) of a smaller result; the reference's is dense")
            early = st.arrays.get(f"early{j}")
            if early is not None and got is not None:
                diff = ~bitwise_equal(early, got)
                if diff.any():
                    problems.append(f"read on the current stream right after the call, {int(diff.sum())} elements "
                                    f"differ from the values after torch.cuda.synchronize(): the result is computed "
                                    f"on another stream without ordering")
                    ev["unsynchronised_elements"] = int(diff.sum())
            if problems:
                out.append(self.finding(ctx, severity, f"case {label} output {j}: " + "; ".join(problems), ev,
                                        case=case, seed=b))
        return out


def _written_outputs(written: set[int]) -> set[int]:
    """Output indices that are out/inout buffers (outputs are the written inputs in index
    order when the task declares them): all of them, or none."""
    return set(range(len(written))) if written else set()
