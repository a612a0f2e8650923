"""``profile-attached``: what the profiles a task attaches as evidence say, and where they
disagree with what kws observed."""

from __future__ import annotations

from typing import Any

from workstation.analysis.roofline import GPU_MARGIN
from workstation.checks.support.profiling import SelfProfile, family_of, fmt_ns, self_profile
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.profiles.analysis import (
    device_peaks,
    kernel_rooflines,
    names_overlap,
    role_summary,
    roofline_position,
)
from workstation.profiles.load import load_all
from workstation.profiles.model import Profile
from workstation.schema.problem import Problem
from workstation.task.model import AttachedProfile, Task

#: the attached profiles' times contradict the claim when the candidate's time per call is
#: more than this fraction above the time the claim implies.
CLAIM_MARGIN = 0.10
#: the attached candidate profile is "much faster" than kws's own GPU profile of the same
#: case on the same device model below this fraction of kws's time.
FASTER_THAN_KWS = 0.5


def attached_case(ctx: CheckContext, ap: AttachedProfile) -> dict[str, Any]:
    """The case an attached profile profiles: its ``case``, else the first
    ``[benchmark]`` case, else the first declared case."""
    if ap.case is not None:
        return dict(ap.case)
    return dict(ctx.task.benchmark_cases[0]) if ctx.task.benchmark_cases else dict(ctx.task.cases[0])


def _time_per_call(p: Profile) -> tuple[float | None, str]:
    """(ns per call, what it is): the wall time per call when the file marks calls, else
    the device-busy time, else the summed device time, else the host op time."""
    if p.wall_ns:
        return p.per_call(p.wall_ns), "wall"
    if p.busy_ns:
        return p.per_call(p.busy_ns), "device-busy"
    dev = p.device_time_ns()
    if dev:
        return p.per_call(dev), "device"
    ops = sum(o.total_ns or 0.0 for o in p.ops)
    return (p.per_call(ops), "host-op") if ops else (None, "")


@register
class ProfileAttached(Check):
    """The profiles a task attaches (``[[profiles]]``: torch.profiler traces, ``ncu --csv``
    exports, Nsight Systems SQLite exports, proton hatchet files) contradict physics, the
    claim, or what kws saw the candidate run.

    Catches:
        the profiles a task attaches as evidence (`[[profiles]]`) contradicting
        physics (more bandwidth or FLOP/s than the device has), the claim (a speedup the traces do
        not show), or what kws saw the candidate run (a profile of another kernel, or far faster
        numbers than kws measures on the same device).

    How:
        each file is read under the schema layer's guard into kernels with counts,
        durations, DRAM bytes and FLOPs where the format records them
        ([profiles.md](profiles.md), "What is read from each format"); roofline positions are
        placed against the datasheet peaks of the device the file names.

    Findings:
        | finding | severity |
        |---|---|
        | a file cannot be read (too large, not UTF-8, nested too deep, not that format, a damaged database): file, key and problem | `warn` |
        | a kernel (or, for a torch trace of kws's profile case, the case's bytes and FLOPs) moves more bytes or FLOPs per second than the device's peak by more than 5% | `fail` |
        | attached candidate and baseline (or reference) profiles of one case show a speedup more than 10% below the claim, the other side's time being its wall time per call (call markers in the file) | `fail`; with device time only: `warn` (a launch-bound baseline's wall time can exceed its device time) |
        | an attached candidate profile none of whose kernels is one kws saw the candidate launch or finds in its sources | `warn` |
        | GPU: an attached candidate profile of kws's profile case on the same device model more than 2x faster than kws's own profile | `warn` |
        | per file: kernels, time per call, achieved bandwidth and FLOP/s as fractions of the peaks (evidence `attached_profile`, the report's `profile.attached`) | `info` |
        | the task attaches no profile | `skip` |

    Examples:
        `rmsnorm-ncu-profile`: `profiles/candidate.ncu.csv: the attached profile of
        the candidate shows rms_norm_fwd_kernel, none of which is a kernel of the candidate (kws
        saw it launch _rmsnorm_rows; its sources define _rmsnorm_rows): a profile of another
        version or another code path`; `layernorm-trace-claim`: `profiles/candidate.trace.json and
        profiles/baseline.trace.json show the candidate at 12.3 ms (wall) and the baseline at 352 us
        (wall) per call on case M=1024 N=1024 float32: 0.0286x, but the task claims 2.5x`.

    Source:
        reviewers are asked to reason from Nsight Systems/Compute and framework
        profiler traces and say what they concluded; the peaks are the vendors' datasheets
        (`workstation/analysis/roofline.py`).

    Limits:
        a `mixed` file's kernels cannot be told apart by role; ncu's FLOP counters
        cover CUDA-core instructions only (tensor-core FLOP/s are not seen, so FLOP/s are a lower
        bound); a file without bytes or FLOPs gets no roofline position; peaks exist for the GPU
        models kws lists (proton's own device record gives a bandwidth peak otherwise). Reading
        the files needs no GPU; the comparison with kws's own profile needs one.

    Not judged when:
        kws's own profile of the candidate and the other side runs first: a role whose backend or
        libraries cannot run here (a CUDA candidate on the CPU), or a profile step stopped by a
        time limit, makes the whole check `NotJudged`, the attached files unread. A profile step
        that died: the candidate's death is a `fail`, the other side's the task's problem (`skip`
        unless a finding fails). A file that cannot be read: `warn`. Where kws's own profile of the
        candidate raised or measured no workload, a candidate trace of kws's profile case with a
        device time per call but without per-kernel bytes gets no case roofline and no physics
        bound: not judged for that file, naming it and the reason. The comparison with kws's own
        timings needs a GPU profile; on the CPU, or where torch.profiler did not run, it is not
        made.

    Forgeable:
        Measured in the job process: source, jaxpr, compiler output and attached files read by kws.
        Still forgeable from inside: nothing at run time (static); the sources may of course lie in comments.
    """

    id = "profile-attached"
    order = 46
    title = "Attached profiles"

    @classmethod
    def applies(cls, task: Task) -> str:
        return "" if task.profiles else "the task attaches no profile ([[profiles]] in task.toml)"

    def run(self, ctx: CheckContext) -> list[Finding]:
        loaded = load_all(ctx.task)
        sp = self_profile(ctx)
        findings: list[Finding] = []
        docs: list[dict[str, Any]] = []
        good: list[tuple[AttachedProfile, Profile, dict[str, Any]]] = []
        for ap, got in loaded:
            if isinstance(got, Problem):
                docs.append({"file": ap.file, "format": ap.format, "role": ap.role, "problem": str(got)})
                findings.append(self.finding(ctx, "warn", f"{ap.key}: the attached {ap.format} profile cannot be "
                                             f"read: {got}", {"file": ap.file, "problem": got.as_dict()}))
                continue
            d = self._describe(ctx, ap, got, sp)
            docs.append(d)
            good.append((ap, got, d))
            findings += self._physics(ctx, ap, got, d)
            findings += self._kernels_differ(ctx, ap, got, sp)
            findings += self._faster_than_kws(ctx, ap, got, d, sp)
        findings += self._claim(ctx, good)
        ctx.extend_report("profile", "attached", docs)
        for (ap, p, d) in good:
            findings.insert(0, self.finding(ctx, "info", self._summary(ap, p, d), {"attached_profile": d}))
        return findings

    # -- description -----------------------------------------------------------------------------

    def _describe(self, ctx: CheckContext, ap: AttachedProfile, p: Profile, sp: SelfProfile | None) -> dict[str, Any]:
        case = attached_case(ctx, ap)
        own = sp.own_names if (sp is not None and ap.role == "candidate") else []
        d = {"file": ap.file, "key": ap.key, "case": case,
             **role_summary(p, own=own, family_of=family_of,
                            judge_own=ap.role == "candidate" and ctx.task.backend != "torch" and bool(own))}
        peaks = device_peaks(p.device, p.device_info, str(case.get("dtype", "")))
        peaks_max = device_peaks(p.device, p.device_info)  # the highest compute peak: a true bound
        d["peaks"] = peaks
        d["kernel_roofline"] = kernel_rooflines(p, peaks)
        if not d["kernel_roofline"] and ap.role == "candidate" and sp is not None and sp.case == case \
                and not sp.candidate.workload and peaks_max and _time_per_call(p)[1] in ("device-busy", "device"):
            # the file's time could be placed against the case's bytes and FLOPs, but kws has none to use
            cand = sp.candidate
            why = (f"kws's own profile of the candidate {cand.outcome.failure_text()}" if not cand.ok
                   else "kws's own profile of the candidate measured no workload")
            ctx.could_not_judge(f"{ap.file}: the file records no bytes or FLOPs per kernel and {why} on case "
                                 f"{case_label(case)}, so its time per call was not placed against the case's bytes "
                                 "and FLOPs (no case roofline, no check against the device's peaks)")
        if not d["kernel_roofline"] and ap.role == "candidate" and sp is not None and sp.case == case \
                and sp.candidate.workload:
            t, what = _time_per_call(p)
            if t and what in ("device-busy", "device"):
                wl = sp.candidate.workload
                pos = roofline_position(float(wl.read_bytes + wl.write_bytes),
                                        float(wl.flops) if wl.flops else None, t, peaks)
                if pos is not None:
                    d["case_roofline"] = {**pos, "basis": f"the case's bytes and flops as kws measures them, over the "
                                          f"file's {what} time per call"}
        d["peaks_for_bounds"] = peaks_max
        return d

    def _summary(self, ap: AttachedProfile, p: Profile, d: dict[str, Any]) -> str:
        top = ", ".join(f"{k['name'][:50]} x{k['count']}" + (f" {fmt_ns(k['mean_ns'])}" if k.get("mean_ns") else "")
                        for k in d["kernels"][:3])
        if not top:
            top = "no device kernels; host ops " + (", ".join(f"{o['name'][:40]} x{o['count']}" for o in d["ops"][:4])
                                                     or "none")
        dev = p.device or (p.device_info.get("arch") and f"arch {p.device_info.get('arch')}") or (
            "the CPU" if p.device_kind == "cpu" else "device not named")
        t, what = _time_per_call(p)
        s = (f"{ap.file} ({ap.format}, {ap.role}, {p.calls} call(s), {dev}): {top}; {fmt_ns(t)} {what} time per call"
             if t else f"{ap.file} ({ap.format}, {ap.role}, {dev}): {top}")
        rl = d["kernel_roofline"] or ([d["case_roofline"]] if d.get("case_roofline") else [])
        fr = [r for r in rl if r.get("bandwidth_fraction") is not None]
        if fr:
            best = max(fr, key=lambda r: r["bandwidth_fraction"])
            s += (f"; achieved {best['bandwidth'] / 1e9:.0f} GB/s = {best['bandwidth_fraction']:.0%} of "
                  f"{best['peak_bandwidth'] / 1e9:.0f} GB/s")
        elif d.get("peaks") is None and p.device_kind != "cpu":
            s += "; no datasheet peaks for this device: no roofline position"
        return s

    # -- verdicts --------------------------------------------------------------------------------

    def _physics(self, ctx: CheckContext, ap: AttachedProfile, p: Profile, d: dict[str, Any]) -> list[Finding]:
        bound = d.get("peaks_for_bounds")
        if not bound:
            return []
        out = []
        rows = list(d["kernel_roofline"]) + ([{"name": "the case", **d["case_roofline"]}] if d.get("case_roofline")
                                              else [])
        for r in rows:
            over = []
            if r.get("bandwidth") and bound.get("bandwidth") and r["bandwidth"] > bound["bandwidth"] * GPU_MARGIN:
                over.append(f"{r['bytes']:,.0f} bytes in {fmt_ns(r['ns'])} = {r['bandwidth'] / 1e12:.3g} TB/s, above "
                            f"the peak {bound['bandwidth'] / 1e12:.3g} TB/s")
            if r.get("flops_per_s") and bound.get("flops") and r["flops_per_s"] > bound["flops"] * GPU_MARGIN:
                over.append(f"{r['flops']:,.0f} FLOPs in {fmt_ns(r['ns'])} = {r['flops_per_s'] / 1e12:.3g} TFLOP/s, "
                            f"above the peak {bound['flops'] / 1e12:.3g} TFLOP/s")
            if over:
                out.append(self.finding(
                    ctx, "fail", f"{ap.file}: {r['name'][:60]} moves {'; '.join(over)} of {p.device or 'the device'} "
                    f"({bound['source']}): these numbers are not a measurement of this work on that device",
                    {"file": ap.file, "kernel": r, "peaks": bound, "device": p.device}))
        return out

    def _kernels_differ(self, ctx: CheckContext, ap: AttachedProfile, p: Profile,
                        sp: SelfProfile | None) -> list[Finding]:
        if ap.role != "candidate" or sp is None or ctx.task.backend not in ("triton", "cuda"):
            return []
        theirs = [k.name for k in p.kernels if k.kind == "kernel"]
        mine = set(sp.own_names)
        cp = sp.candidate.profile
        if cp is not None and sp.time_shares:
            mine |= {k.name for k in cp.kernels if k.kind == "kernel"}
        if not theirs or not mine or names_overlap(theirs, mine):
            return []
        ran = sorted(sp.candidate.launches.kernels)
        return [self.finding(
            ctx, "warn", f"{ap.file}: the attached profile of the candidate shows {', '.join(sorted(set(theirs))[:4])}, "
            f"none of which is a kernel of the candidate (kws saw it launch {', '.join(ran) or 'none'}; its sources "
            f"define {', '.join(sp.own_names) or 'none'}): a profile of another version or another code path",
            {"file": ap.file, "attached_kernels": sorted(set(theirs))[:20], "kws_kernels": ran,
             "own_kernels": sp.own_names})]

    def _faster_than_kws(self, ctx: CheckContext, ap: AttachedProfile, p: Profile, d: dict[str, Any],
                         sp: SelfProfile | None) -> list[Finding]:
        if ap.role != "candidate" or sp is None or not sp.time_shares or sp.candidate.profile is None:
            return []
        mine = sp.candidate.profile
        if d["case"] != sp.case or not p.device or p.device != mine.device:
            return []
        theirs_t, mine_t = p.per_call(p.device_time_ns()), mine.per_call(mine.device_time_ns())
        if not theirs_t or not mine_t or theirs_t >= FASTER_THAN_KWS * mine_t:
            return []
        return [self.finding(
            ctx, "warn", f"{ap.file}: the attached profile shows the candidate's kernels taking {fmt_ns(theirs_t)} per "
            f"call on case {case_label(sp.case)}; kws's own profile on the same device model ({mine.device}) measures "
            f"{fmt_ns(mine_t)}: the attached numbers are not what this candidate does here",
            {"file": ap.file, "attached_ns_per_call": theirs_t, "kws_ns_per_call": mine_t, "case": sp.case},
            case=sp.case)]

    def _claim(self, ctx: CheckContext, good: list[tuple[AttachedProfile, Profile, dict[str, Any]]]) -> list[Finding]:
        claim = float(ctx.task.claims.speedup or 0.0)
        if claim <= 0:
            return []
        other_role = "baseline" if "baseline" in ctx.task.entry else "reference"
        cands = [(ap, p, d) for ap, p, d in good if ap.role == "candidate"]
        others = [(ap, p, d) for ap, p, d in good if ap.role == other_role]
        out = []
        for cap, cp, cd in cands:
            for oap, op, od in others:
                if cd["case"] != od["case"]:
                    continue
                ct, cwhat = _time_per_call(cp)
                ot, owhat = _time_per_call(op)
                if not ct or not ot:
                    continue
                implied = ot / claim
                shown = ot / ct
                if ct <= implied * (1 + CLAIM_MARGIN):
                    continue
                strong = owhat == "wall"
                sev = "fail" if strong else "warn"
                tail = "" if strong else (f" (the {other_role}'s time is {owhat} time: its wall time, not in the file, "
                                          "may be longer if it is launch-bound)")
                out.append(self.finding(
                    ctx, sev, f"{cap.file} and {oap.file} show the candidate at {fmt_ns(ct)} ({cwhat}) and the "
                    f"{other_role} at {fmt_ns(ot)} ({owhat}) per call on case {case_label(cd['case'])}: "
                    f"{shown:.3g}x, but the task claims {claim:g}x{tail}",
                    {"candidate_file": cap.file, "other_file": oap.file, "candidate_ns_per_call": ct,
                     "candidate_time_kind": cwhat, "other_ns_per_call": ot, "other_time_kind": owhat,
                     "speedup_shown": shown, "claim": claim, "margin": CLAIM_MARGIN, "case": cd["case"]},
                    case=cd["case"]))
        return out
