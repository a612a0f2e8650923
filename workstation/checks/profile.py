"""``profile``: which kernels really ran when the candidate ran, and what the time split
says about the claim."""

from __future__ import annotations

from typing import Any

import msgspec

from workstation.checks.support.kernelwork import kernel_work, later_call_work
from workstation.checks.support.profiling import (
    CPU_WARMUP,
    GPU_WARMUP,
    SelfProfile,
    family_of,
    fmt_ns,
    self_profile,
)
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.profiles.analysis import (
    device_peaks,
    is_delegated,
    op_base,
    role_summary,
    roofline_position,
)

#: the candidate's own kernels below this share of its (non-delegated) device time: fail;
#: below :data:`OWN_SHARE_WARN`: warn.
OWN_SHARE_FAIL = 0.10
OWN_SHARE_WARN = 0.50
#: "far more launches than the baseline": at least this factor and this many more per call.
FAR_MORE_FACTOR = 4.0
FAR_MORE_MIN = 8
#: the claim is contradicted when the candidate's device time per call exceeds the time the
#: claim implies (the other side's wall time per call / claim) by more than this fraction.
SPLIT_MARGIN = 0.10


def ran_text(doc: dict[str, Any], limit: int = 4) -> str:
    """``_rows x2 (own), aten::mm x1`` for a role summary: its kernels, then host ops."""
    parts = []
    for k in doc["kernels"][:limit]:
        tag = " (own)" if k.get("own") else ""
        share = f" {k['share']:.0%}" if k.get("share") is not None else ""
        parts.append(f"{k['name'][:60]} x{k['count']}{tag}{share}")
    ops = [o for o in doc["ops"] if op_base(o["name"]) not in ("empty", "empty_like", "empty_strided")]
    for o in ops[:limit]:
        parts.append(f"{o['name'][:40]} x{o['count']}")
    return ", ".join(parts) or "nothing"


def profile_doc(ctx: CheckContext, sp: SelfProfile) -> dict[str, Any]:
    """kws's own profile as the report's ``profile.self`` (docs/profiles.md)."""
    judge = ctx.task.backend != "torch"
    roles = []
    for rr in (sp.candidate, sp.other):
        if rr is None:
            continue
        d: dict[str, Any] = {"role": rr.role, "ok": rr.ok}
        if not rr.ok:
            d["failure"] = rr.outcome.failure_text()
        if rr.profile is not None:
            d.update(role_summary(rr.profile, own=sp.own_names if rr.role == "candidate" else (),
                                  delegated=sp.delegated, family_of=family_of,
                                  judge_own=judge and rr.role == "candidate"))
        if rr.profiler_error:
            d["profiler_error"] = rr.profiler_error
        d["triton_launches"] = {"profiled": dict(rr.launches.kernels), "warmup": dict(rr.warmup_launches.kernels),
                                "failed": dict(rr.launches.failed), "errors": list(rr.launches.errors)}
        roles.append(d)
    cand = sp.candidate
    doc: dict[str, Any] = {
        "case": sp.case, "seed": sp.seed, "case_source": sp.case_source, "device": sp.device,
        "time_shares": sp.time_shares,
        "why_no_time_shares": "" if sp.time_shares else (
            "the Triton interpreter runs kernels as Python on the CPU: they are not profiler events, so only "
            "launch tracing names them (counts, no durations)" if not sp.on_gpu else
            "the profile has no device durations"),
        "own_kernels_expected": sp.own_names, "delegated_ops": sp.delegated, "roles": roles,
        "workload": msgspec.to_builtins(cand.workload),
    }
    if sp.time_shares and cand.workload and cand.profile is not None:
        busy = cand.profile.per_call(cand.profile.busy_ns)
        wl = cand.workload
        peaks = device_peaks(cand.profile.device, dtype=str(sp.case.get("dtype", "")))
        doc["roofline"] = roofline_position(float(wl.read_bytes + wl.write_bytes),
                                            float(wl.flops) if wl.flops else None, busy, peaks)
    return doc


@register
class SelfProfileCheck(Check):
    """The candidate's own kernels never ran, or ran for a small share of its device time;
    the time split contradicts the claimed speedup; the candidate launches far more kernels
    than its baseline.

    Catches:
        a candidate whose own kernels never ran when it ran (a silent fallback to
        framework ops: a size-gated `if x.numel() <= SMALL: return F.gelu(x)`, a failing launch
        caught somewhere), or ran for a small share of its device time; a claimed speedup that the
        time split rules out; a candidate that launches far more kernels per call than its
        baseline (a launch per row from Python, unfused glue ops).

    How:
        kws profiles the candidate and the baseline (the reference without one) in
        children of their own, on one case (`--case`; on a GPU the first `[benchmark]` case, else
        the largest declared one; on the CPU the first declared case), with `torch.profiler` and
        Triton launch tracing after warm-up calls ([profiles.md](profiles.md)). The candidate's
        own kernels are the Triton kernels its calls launched, the `@triton.jit` functions of its
        sources and (backend `cuda`) their `__global__` functions; ops the task lets it delegate to
        (`[delegation] ops`) are left out of its share.

    Findings:
        | finding | severity |
        |---|---|
        | backend `triton`/`cuda`: the profiled calls launched none of the candidate's own kernels (with what ran instead and the launch error, if any) | `fail` |
        | the same where every framework op it ran is a delegated one, confirmed by poisoned stores (output elements no kernel produced on that case) | `fail`; not judged when not confirmed |
        | its Triton kernels ran only in the warm-up calls, none in the profiled ones, confirmed by poisoned stores: the call after the warm-up, on the same inputs in the same process, with every kernel store poisoned, returns elements with their plain values (a replayed result) | `fail`; not judged when not confirmed (or on a GPU) |
        | GPU: own kernels under 10% of the device time of its non-delegated work (the framework kernels named, with the op that launched each) | `fail`; under 50%: `warn` |
        | GPU, with a claim: the candidate's device-busy time per call exceeds the other side's wall time per call under the profiler divided by the claim, by more than 10% (the split: own, framework, delegated; "even with its own kernels taking no time" when the framework kernels alone exceed it) | `fail` |
        | the candidate launches at least 4x and at least 8 more kernels per call than the other side | `warn` |
        | the profile: kernels and ops with counts, time shares, launches per call, and on a GPU the case's roofline position (evidence `profile`, the report's `profile.self`) | `info` |

    Example:
        (`gelu-small-fallback`): `case M=64 N=1024 float16 (the first declared case,
        seed 0): the candidate's own kernels never ran (_gelu_kernel); its calls ran aten::gelu x1
        instead`.

    Source:
        KernelBench(-v3) compares profiler kernel lists to show which kernels ran; the
        fallback patterns of KernelBench and GPU MODE submissions; Amdahl's law for the split (the
        candidate's device-busy time is a lower bound of its wall time; the other side's wall time
        under the profiler is, if anything, inflated).

    Limits:
        under `TRITON_INTERPRET=1` (no GPU) Triton kernels are not profiler events:
        no durations, no time-share, claim or roofline verdicts; the kernel list comes from launch
        tracing and host op times include no kernel time. Launch counts on the CPU count host ops
        that launch kernels on a GPU (views and allocations excluded), an estimate. Kernels
        launched through `triton.compile`'s `CompiledKernel` are not traced. The GPU verdicts are
        tested on injected traces here and need a GPU run to be seen on real ones.

    Not judged when:
        a replay (kernels only in the warm-up calls) or a delegated-ops-only run could not be
        confirmed with poisoned stores (a GPU, the poisoned run failed, or its kernels wrote every
        element); the other side (baseline or reference) could not be profiled: the launch and claim
        comparisons with it did not run; not judged, with the candidate's profile still
        reported. A candidate that fails in the profiled run is an `info` (correctness and
        failure-mismatch judge the failure).

    Forgeable:
        Measured in the job process: torch.profiler and launch tracing in the job process.
        Still forgeable from inside: a candidate that stops or replaces the profiler session is reported by `fallback`'s recorder check; kernels launched outside Triton's launcher are not traced.
    """

    id = "profile"
    order = 45
    title = "What ran (self-profile)"

    def run(self, ctx: CheckContext) -> list[Finding]:
        sp = self_profile(ctx)
        doc = profile_doc(ctx, sp)
        ctx.extend_report("profile", "self", doc)
        label = f"case {case_label(sp.case)} ({sp.case_source}, seed {sp.seed})"
        cand, other = sp.candidate, sp.other
        if not cand.ok:
            return [self.finding(ctx, "info", f"{label}: the candidate {cand.outcome.failure_text()} in the profiled "
                                 "run: nothing to profile (correctness and failure-mismatch judge the failure)",
                                 {"profile": doc, **cand.outcome.failure_evidence()}, case=sp.case, seed=sp.seed)]
        cdoc = next(r for r in doc["roles"] if r["role"] == "candidate")
        odoc = next((r for r in doc["roles"] if r["role"] != "candidate"), None)
        findings = self._own(ctx, sp, cdoc, label)
        findings += self._launches(ctx, sp, cdoc, odoc, label)
        findings += self._split(ctx, sp, cdoc, odoc, label)
        summary = f"{label}: the candidate ran {ran_text(cdoc)} ({_lpc(cdoc)})"
        if odoc is not None:
            summary += (f"; the {other.role} ran {ran_text(odoc)} ({_lpc(odoc)})" if other is not None and other.ok
                        else f"; the {odoc['role']} could not be profiled ({odoc.get('failure', '?')})")
            if other is None or not other.ok:  # the comparisons with it (launches, claim) did not run
                ctx.could_not_judge(f"the {odoc['role']} could not be profiled ({str(odoc.get('failure', '?'))[:200]})")
        if not sp.time_shares:
            summary += " [no time shares: " + doc["why_no_time_shares"].split(":")[0] + "]"
        findings.insert(0, self.finding(ctx, "info", summary, {"profile": doc}, case=sp.case, seed=sp.seed))
        return findings

    def _own(self, ctx: CheckContext, sp: SelfProfile, cdoc: dict[str, Any], label: str) -> list[Finding]:
        backend = ctx.task.backend
        if backend not in ("triton", "cuda") or (backend == "cuda" and not sp.on_gpu):
            return []
        cand = sp.candidate
        ev = {"case": sp.case, "seed": sp.seed, "own_kernels_expected": sp.own_names,
              "triton_launches": cdoc["triton_launches"], "ops": cdoc["ops"][:12], "kernels": cdoc["kernels"][:12],
              "delegated_ops": sp.delegated}
        ran_own = bool(cdoc.get("own_kernels")) if sp.time_shares or backend == "cuda" else \
            bool(cand.launches.launches)
        if not ran_own:
            warm = cand.warmup_launches.launches
            work = [o for o in cdoc["ops"] if op_base(o["name"]) not in _TRIVIAL]
            all_delegated = bool(work) and all(is_delegated(o["name"], sp.delegated, family_of) for o in work)
            failed = cand.launches.failed_launches
            why = (f"; {failed} launch(es) raised: {(cand.launches.errors or ['?'])[0]}" if failed else "")
            if warm and backend == "triton":
                return self._replay(ctx, sp, cdoc, ev, label, warm)
            sev = "warn" if all_delegated else "fail"
            tail = (" (every framework op it ran is one the task lets it delegate to)" if all_delegated else "")
            expected = ", ".join(sp.own_names[:4]) or "none found in its sources"
            summary = (f"{label}: the candidate's own kernels never ran ({expected}){why}; its calls ran "
                       f"{ran_text(cdoc)} instead{tail}")
            if all_delegated:
                return self._delegated_only(ctx, sp, summary, ev)
            return [self.finding(ctx, sev, summary, ev, case=sp.case, seed=sp.seed)]
        share = cdoc.get("own_share")
        if not sp.time_shares or share is None or share >= OWN_SHARE_WARN:
            return []
        sev = "fail" if share < OWN_SHARE_FAIL else "warn"
        fw = [k for k in cdoc["kernels"] if not k.get("own") and not k.get("delegated") and k["kind"] == "kernel"]
        fw_text = ", ".join(f"{k['name'][:50]} {k['share']:.0%}" + (f" (from {k['launched_by']})" if k['launched_by']
                                                                       else "") for k in fw[:3] if k.get("share"))
        return [self.finding(
            ctx, sev, f"{label}: the candidate's own kernels ran for {share:.0%} of its device time "
            f"({fmt_ns(cdoc.get('own_ns_per_call'))} of {fmt_ns(cdoc.get('device_ns_per_call'))} per call"
            + (f", delegated ops excluded: {fmt_ns(cdoc.get('delegated_ns_per_call'))}" if cdoc.get(
                "delegated_ns_per_call") else "") + f"); framework kernels did the rest: {fw_text}",
            {**ev, "own_share": share}, case=sp.case, seed=sp.seed)]

    def _replay(self, ctx: CheckContext, sp: SelfProfile, cdoc: dict[str, Any], ev: dict[str, Any], label: str,
                warm: int) -> list[Finding]:
        """Kernels launched only in the warm-up calls: confirmed by poisoned stores from the
        call after them on the same inputs (``fail`` with that evidence), else not judged."""
        earlier = GPU_WARMUP if sp.on_gpu else CPU_WARMUP
        seen = (f"{label}: the candidate launched its Triton kernels only in its first call(s) ({warm} launch(es) in "
                f"{earlier} warm-up call(s)), none in the profiled calls (they ran {ran_text(cdoc)})")
        if sp.on_gpu:
            ctx.could_not_judge(f"{seen}; whether the profiled calls replay an earlier result was not confirmed "
                                "(kws poisons kernel stores only under the Triton interpreter)")
            return [self.finding(ctx, "info", seen + ": not confirmed on a GPU", ev, case=sp.case, seed=sp.seed)]
        w = later_call_work(ctx, sp.case, sp.seed, earlier)
        ev = {**ev, "confirmation": w.evidence()}
        if w.judged and w.bad:
            return [self.finding(
                ctx, "fail", f"{seen}; confirmed: with every kernel store poisoned from call {earlier + 1} on, that "
                f"call on the same inputs returned {w.bad_text()} with their plain values: no kernel of that call produced them, it replays a result of an earlier "
                "call", ev, case=sp.case, seed=sp.seed)]
        why = (f"call {earlier + 1} on the same inputs, with its kernel stores poisoned, had every element written by "
               "its kernels" if w.judged else w.reason)
        ctx.could_not_judge(f"{seen}; not confirmed: {why}")
        return [self.finding(ctx, "info", f"{seen}; not confirmed ({why})", ev, case=sp.case, seed=sp.seed)]

    def _delegated_only(self, ctx: CheckContext, sp: SelfProfile, summary: str, ev: dict[str, Any]) -> list[Finding]:
        """Own kernels never ran and only delegated ops did: ``fail`` when poisoned stores show
        output elements no kernel produced on that case, else not judged."""
        if sp.on_gpu or ctx.task.backend != "triton":
            ctx.could_not_judge(f"{summary}: whether its output came from the delegated ops alone was not confirmed "
                                "(kws poisons kernel stores only for Triton under the interpreter)")
            return [self.finding(ctx, "info", summary, ev, case=sp.case, seed=sp.seed)]
        w = kernel_work(ctx, [(sp.case, "declared" if sp.case in ctx.cases else "the case given")], sp.seed)[0]
        ev = {**ev, "confirmation": w.evidence()}
        if w.judged and w.bad:
            return [self.finding(ctx, "fail", f"{summary}; with every kernel store poisoned, {w.bad_text()} kept their "
                                 "values: the delegated framework "
                                 "ops alone produced them, no kernel of the candidate's did", ev,
                                 case=sp.case, seed=sp.seed)]
        why = "its kernels wrote every element under poisoned stores" if w.judged else w.reason
        ctx.could_not_judge(f"{summary}; not confirmed: {why}")
        return [self.finding(ctx, "info", f"{summary}; not confirmed ({why})", ev, case=sp.case, seed=sp.seed)]

    def _launches(self, ctx: CheckContext, sp: SelfProfile, cdoc: dict[str, Any], odoc: dict[str, Any] | None,
                  label: str) -> list[Finding]:
        if odoc is None or not odoc.get("ok") or cdoc.get("launches_per_call") is None \
                or odoc.get("launches_per_call") is None:
            return []
        c, o = cdoc["launches_per_call"], odoc["launches_per_call"]
        if c < FAR_MORE_FACTOR * max(o, 1.0) or c - o < FAR_MORE_MIN:
            return []
        basis = cdoc["launch_basis"]
        return [self.finding(
            ctx, "warn", f"{label}: the candidate launches {c:.3g} kernels per call, {c / max(o, 1.0):.3g}x the "
            f"{odoc['role']}'s {o:.3g} ({basis}): a launch per row or per tile from Python, or unfused glue ops",
            {"case": sp.case, "candidate_launches_per_call": c, "other_launches_per_call": o, "basis": basis,
             "candidate_kernels": cdoc["kernels"][:12], "candidate_ops": cdoc["ops"][:12]},
            case=sp.case, seed=sp.seed)]

    def _split(self, ctx: CheckContext, sp: SelfProfile, cdoc: dict[str, Any], odoc: dict[str, Any] | None,
               label: str) -> list[Finding]:
        claim = float(ctx.task.claims.speedup or 0.0)
        if claim <= 0 or not sp.time_shares or odoc is None or not odoc.get("ok"):
            return []
        busy, wall = cdoc.get("busy_ns_per_call"), odoc.get("wall_ns_per_call")
        if not busy or not wall:
            return []
        implied = wall / claim
        if busy <= implied * (1 + SPLIT_MARGIN):
            return []
        split = (f"own kernels {fmt_ns(cdoc.get('own_ns_per_call'))}, framework kernels "
                 f"{fmt_ns(cdoc.get('framework_ns_per_call'))}, delegated {fmt_ns(cdoc.get('delegated_ns_per_call'))}")
        fw_alone = (cdoc.get("framework_ns_per_call") or 0) + (cdoc.get("delegated_ns_per_call") or 0)
        tail = (": even with its own kernels taking no time, the framework kernels it runs exceed it"
                if fw_alone > implied * (1 + SPLIT_MARGIN) else "")
        return [self.finding(
            ctx, "fail", f"{label}: the claimed {claim:g}x over the {odoc['role']} implies at most {fmt_ns(implied)} per "
            f"call ({odoc['role']} {fmt_ns(wall)} wall per call under the profiler / {claim:g}), but the candidate "
            f"keeps the device busy {fmt_ns(busy)} per call ({split}){tail}",
            {"case": sp.case, "claim": claim, "implied_ns_per_call": implied, "candidate_busy_ns_per_call": busy,
             "other_wall_ns_per_call": wall, "margin": SPLIT_MARGIN, "candidate": {k: cdoc.get(k) for k in (
                 "own_ns_per_call", "framework_ns_per_call", "delegated_ns_per_call", "own_share")}},
            case=sp.case, seed=sp.seed)]


_TRIVIAL = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "full", "copy_", "to", "_to_copy",
            "contiguous", "clone", "view", "reshape", "fill_", "zero_", "new_empty", "set_", "resize_", "detach"}


def _lpc(d: dict[str, Any]) -> str:
    v = d.get("launches_per_call")
    return f"{v:.3g} launch(es) per call" if v is not None else "launches unknown"

