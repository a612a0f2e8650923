"""``tampering``: the candidate changes process-global state."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from workstation.checks.support.static import StateSite, scan_state_writes
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.state import Snapshot, StateProbeExtra
from workstation.protocol.steps import StateProbeStep

#: flags whose change alters other code's numerics, determinism or tracing: ``fail``.
FAIL_FLAGS = {
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision", "torch.backends.cudnn.conv.fp32_precision",
    "torch.backends.mkldnn.matmul.fp32_precision", "torch.get_float32_matmul_precision()",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_fp16_accumulation",
    "torch.are_deterministic_algorithms_enabled()", "torch.is_deterministic_algorithms_warn_only_enabled()",
    "torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark", "torch.backends.cudnn.enabled",
    "flush_denormal (CPU FTZ/DAZ)", "torch.get_default_dtype()", "torch.get_default_device()",
    "torch.backends.cuda.flash_sdp_enabled()", "torch.backends.cuda.mem_efficient_sdp_enabled()",
    "torch.backends.cuda.math_sdp_enabled()", "sys.gettrace()", "sys.getprofile()",
}
#: environment variables that change numerics or kernel selection: ``fail`` when changed.
NUMERIC_ENV = {"NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TRITON_F32_DEFAULT",
               "CUBLAS_WORKSPACE_CONFIG", "TRITON_INTERPRET", "CUDA_LAUNCH_BLOCKING", "TORCH_CUDNN_V8_API_DISABLED",
               "TRITON_DEFAULT_FP_FUSION"}


def state_changes(a: Snapshot, b: Snapshot) -> list[dict[str, Any]]:
    """What differs between two snapshots (:mod:`workstation.harness.state`): one item per
    change with ``what`` (flag / function / thread / env / stream), ``key``, ``before``,
    ``after`` (a new thread: its snapshot entry as a dict) and ``severity`` (``fail``,
    ``warn`` or ``info``, see the check's doc)."""
    out: list[dict[str, Any]] = []
    fa, fb = a.flags, b.flags
    for k in sorted(set(fa) | set(fb)):
        if fa.get(k) != fb.get(k):
            out.append({"what": "flag", "key": k, "before": fa.get(k), "after": fb.get(k),
                        "severity": "fail" if k in FAIL_FLAGS else "warn"})
    ca, cb = a.functions, b.functions
    for k in sorted(set(ca) | set(cb)):
        if k in ca and ca.get(k) != cb.get(k):
            out.append({"what": "function", "key": k, "before": ca.get(k), "after": cb.get(k),
                        "severity": "fail", "change": "removed" if k not in cb else "replaced"})
        elif k not in ca and k.split(".")[0] == "torch" and ".Tensor." in k:
            out.append({"what": "function", "key": k, "before": None, "after": cb.get(k), "severity": "warn",
                        "change": "added"})
    ta = {t.ident for t in a.threads}
    for t in b.threads:
        if t.ident not in ta and t.alive:
            out.append({"what": "thread", "key": t.name, "before": None, "after": msgspec.to_builtins(t),
                        "severity": "warn"})
    ea, eb = a.env, b.env
    for k in sorted(set(ea) | set(eb)):
        if ea.get(k) != eb.get(k):
            out.append({"what": "env", "key": k, "before": ea.get(k), "after": eb.get(k),
                        "severity": "fail" if k in NUMERIC_ENV else "warn"})
    sa = a.cuda.current_stream if a.cuda is not None else None
    sb = b.cuda.current_stream if b.cuda is not None else None
    if sa is not None and sa != sb:
        out.append({"what": "stream", "key": "torch.cuda.current_stream()", "before": sa, "after": sb,
                    "severity": "fail"})
    return out


def change_text(c: dict[str, Any]) -> str:
    """One change in words: ``torch.backends.cuda.matmul.allow_tf32 False -> True``."""
    if c["what"] == "flag":
        return f"{c['key']} {c['before']} -> {c['after']}"
    if c["what"] == "function":
        d = c.get("detail") or {}
        new = f" by {d.get('module')}.{d.get('qualname')}" if d.get("qualname") else ""
        return f"{c['key']} {c.get('change', 'replaced')}{new}"
    if c["what"] == "thread":
        t = c["after"]
        return f"new {'daemon ' if t.get('daemon') else ''}thread {t.get('name')!r} still running" + (
            f" ({t['target']})" if t.get("target") else "")
    if c["what"] == "env":
        return f"os.environ[{c['key']!r}] {c['before']!r} -> {c['after']!r}"
    return f"{c['key']} {c['before']} -> {c['after']}"


def _site_for(c: dict[str, Any], sites: list[StateSite]) -> StateSite | None:
    key = c["key"]
    for s in sites:
        if key in s.keys or s.target == key:
            return s
    kinds = {"thread": "threads", "env": "env", "stream": "streams"}
    if c["what"] in kinds:
        return next((s for s in sites if kinds[c["what"]] in s.keys), None)
    return None


@register
class Tampering(Check):
    """The candidate changes global state: precision flags, timers, streams, threads,
    monkey-patched functions.

    Catches:
        a candidate that changes process-global state: TF32 and matmul-precision
        knobs "for the surrounding GEMMs", deterministic-algorithm flags, flush-to-zero, the
        default dtype; monkey-patched `torch.allclose`, `torch.testing.assert_close`, timers,
        `torch.cuda.synchronize`/`Event`, `triton.testing.do_bench`; background threads still
        running after the call; environment variables; the current CUDA stream.

    How:
        a `state_probe` step makes the inputs, snapshots global state, imports the
        candidate's module, snapshots again, calls it once (first declared case), and snapshots
        a third time. A snapshot holds the flags (TF32 / `fp32_precision` knobs,
        `get_float32_matmul_precision()`, reduced-precision fp16/bf16 reductions, fp16
        accumulation, deterministic algorithms, cuDNN flags, CPU flush-to-zero probed as
        `2**-130 * 1 == 0`, default dtype and device, grad/inference/anomaly mode, thread counts,
        SDPA backends, `torch.initial_seed()`, numpy's error state, `sys.gettrace/getprofile`,
        signal handlers); a token (owner, `id`, `id(__code__)`) for every callable in builtins,
        time, math, numpy, numpy.testing, torch, torch.nn.functional, torch.testing,
        torch.linalg, torch.special, torch.cuda, triton, triton.testing and the methods of
        `torch.Tensor`, `nn.Module`, `torch.cuda.Event`/`Stream` (through the MRO); live Python
        threads; the environment; on CUDA the current stream (and a count of streams created
        during the call). The parent diffs the snapshots; an AST scan of the candidate finds
        the assignment or setter call behind each change. The reference gets the same probe in
        its own process.

        The snapshot is taken inside the candidate's own process, so the candidate can forge it
        (replace `workstation.harness.state.snapshot`, `builtins.id`...). So kws's fork
        server, a process the candidate cannot reach, also reads the watched namespaces back
        from the job's memory after the probe (`workstation.harness.watch`).

    Findings:
        | finding | severity |
        |---|---|
        | the fork server's outside check sees a change the snapshot does not report (the snapshot was forged or hidden), or a patched kws harness (the probe's result is untrusted) | `fail` |
        | numerics/determinism flags, replaced or removed callables, trace/profile hooks, numerics environment variables (`NVIDIA_TF32_OVERRIDE`, `TORCH_ALLOW_TF32_CUBLAS_OVERRIDE`, ...), the current CUDA stream: per phase (import / call), with each change's line | `fail` |
        | other environment variables, thread counts, grad mode, RNG reseeding, signal handlers, numpy error state | `warn` |
        | new threads still running after the call; CUDA streams created during it (hack-class: work finishing after return, work off the timed stream) | `warn`, not judged |
        | the reference changes global state (`reference-suspect` judges it) | `info` |
        | CUDA streams not examined on the CPU (reason "no CUDA device") | `info` |

    Example:
        (`gelu-tamper`): `importing candidate.py changes
        torch.backends.cuda.matmul.allow_tf32 False -> True (line 9); ... torch.get_float32_matmul_precision()
        'highest' -> 'high' (line 8)`.

    Source:
        submissions that set `allow_tf32`/`set_float32_matmul_precision` "for the
        surrounding GEMMs", patch `torch.allclose` or the benchmark's timers, or leave a
        background thread writing results (GPU MODE and KernelBench reward-hacking reports).

    Limits:
        state outside these namespaces (C-level globals, other modules) is not
        snapshotted; a candidate that restores what it changed before returning is not seen; one
        that writes the namespaces' dict entries back through ctypes defeats the outside check
        too; the
        engine separately reports a task folder changed on disk while its code ran. CPU and GPU
        alike, except streams (GPU only).

    Not judged when:
        the candidate failed during the state probe, so global state after the call was not
        examined: not judged for that case (plus the `warn`/`info` on the failure; a `warn`
        tagged `observation` where a plain call returns). A thread still running after the
        call or a CUDA stream created during it: a `warn` tagged `after-return` / `tampering`
        and not judged (one rule for suspicion: a hack-class signal kws could not confirm is not judged, never a `warn` in a report that exits 0). CUDA
        streams on the CPU are structurally absent (no CUDA device): an `info`, not a limit
        of the run.

    Forgeable:
        Measured in the job process: flags and callables snapshotted before and after each call, plus the outside check.
        Still forgeable from inside: a patch undone before the step ends; a patch of an object's internals (a function's `__code__`, C-level state).
    """

    id = "tampering"
    order = 16
    title = "Global state changed"

    def after_all(self, ctx: CheckContext) -> list[Finding]:
        """The task folder's content digest after every check ran, against the one taken
        before any task code ran (jobs work on copies; a change came through a path the
        task code guessed)."""
        if not ctx.task_folder_changed():
            return []
        return [Finding(self.id, "fail", "the task folder changed on disk while its code ran (kws ran it on a copy)",
                        {"task_dir": str(ctx.task.dir)}, ctx.repro(self.id))]

    def run(self, ctx: CheckContext) -> list[Finding]:
        case, seed = ctx.cases[0], ctx.seeds[0]
        with ThreadPoolExecutor(max_workers=2) as ex:
            fr = ex.submit(ctx.calls, [StateProbeStep(role="reference", case=dict(case), seed=seed)], memo=True)
            cand = ctx.calls([StateProbeStep(role="candidate", case=dict(case), seed=seed)], memo=True)[0]
            ref = fr.result()[0]
        cfile = ctx.task.entry["candidate"].file
        sites = scan_state_writes(ctx.sources, cfile)
        findings: list[Finding] = []
        outside = self._outside(ctx, case, seed, cand)
        if outside is not None:
            findings.append(outside)
        if cand.death_status == "forged":
            pass  # the finding above says it all
        elif not cand.ok:
            plain = ctx.candidate([(case, seed)])[0]
            text = (f"case {case_label(case)} (seed {seed}): the candidate {cand.failure_text()} during the state probe"
                    + ("" if plain.ok else " (as in a plain run)")
                    + "; global state after the failing step was not examined")
            # failing only under the probe is behaviour that depends on being observed
            tag = suspect(ctx, "observation", text) if plain.ok else {}
            findings.append(self.finding(ctx, "warn" if plain.ok else "info", text,
                                         {"case": case, "seed": seed, **cand.failure_evidence(), **tag},
                                         case=case, seed=seed))
            if not plain.ok:
                ctx.could_not_judge(f"case {case_label(case)}: the candidate {cand.failure_text()[:160]} during the "
                                     "state probe, so global state after the call was not examined")
        changes = self._changes(cand)
        for c in changes:
            s = _site_for(c, sites)
            d = c.get("detail") or {}
            if s is not None:
                c["source"] = {"file": cfile, "line": s.line, "text": s.text}
            elif d.get("task_file"):
                c["source"] = {"file": d["task_file"], "line": d.get("line")}
        # a thread still running after return is a hack-class signal (work finishing after the
        # call): its own finding, not judged here (thread-census and late-write look further)
        for sev, threads in (("fail", False), ("warn", False), ("warn", True)):
            group = [c for c in changes if c["severity"] == sev and (c["what"] == "thread") == threads]
            if not group:
                continue
            parts = []
            for phase in ("import", "call"):
                items = [c for c in group if c["phase"] == phase]
                if items:
                    what = f"importing {cfile}" if phase == "import" else "one call of the candidate"
                    parts.append(f"{what} changes " + "; ".join(
                        change_text(c) + (f" (line {c['source']['line']})" if c.get("source") else "")
                        for c in items[:6]) + ("; ..." if len(items) > 6 else ""))
            src = next((c["source"] for c in group if c.get("source")), None)
            ev: dict[str, Any] = {"case": case, "seed": seed, "changes": group}
            if src:
                ev["source"] = {"file": src["file"], "line": src["line"]}
            if threads:
                ev.update(suspect(ctx, "after-return", "; ".join(parts)))
            findings.append(self.finding(ctx, sev, "; ".join(parts), ev, case=case, seed=seed))
        ref_changes = self._changes(ref)
        if ref_changes:
            findings.append(self.finding(
                ctx, "info",
                "the reference changes global state too (reference-suspect's domain): "
                + "; ".join(change_text(c) for c in ref_changes[:6]),
                {"reference_changes": ref_changes}))
        if not ctx.on_gpu:
            findings.append(self.finding(
                ctx, "info", "CUDA streams not examined: no CUDA device (the current stream and the streams "
                "created during the call are checked on a GPU)",
                {"streams": "skipped", "reason": "no CUDA device"}))
        else:
            streams = _probe(cand).streams if cand.ok else None
            created = streams.created if streams is not None else []
            if streams is not None and created:
                site = next((s.site for s in created if s.site), None)
                text = (f"one call of the candidate creates {len(created)} CUDA stream(s)"
                        + (f" ({site.file}:{site.line})" if site else "")
                        + ": work on a side stream escapes timing and ordering on the current stream")
                ev = {"streams": msgspec.to_builtins(streams),
                      **({"source": {"file": site.file, "line": site.line}} if site else {}),
                      **suspect(ctx, "tampering", text)}
                findings.append(self.finding(ctx, "warn", text, ev))
        if not any(f.severity in ("fail", "warn") for f in findings):
            before = _probe(cand).before if cand.ok else None
            n = len(before.functions) if before is not None else 0
            findings.insert(0, self.finding(
                ctx, "info",
                f"no global state changed by importing {cfile} and one call: precision and determinism flags, "
                f"{n} framework/timer callables, threads and environment compared",
                {"case": case, "seed": seed, "callables": n}))
        return findings

    def _outside(self, ctx: CheckContext, case: dict[str, Any], seed: int, cand: CallOutcome) -> Finding | None:
        """What kws's fork server saw changed in the candidate's probe job from outside
        (:mod:`workstation.harness.watch`) that the in-process snapshot did not report: a
        ``fail`` (the snapshot was forged, or the probe's result could not be trusted)."""
        seen = cand.verified
        if not seen:
            return None
        reported = {c["key"] for c in self._changes(cand) if c["what"] == "function"}
        missing = [line for line in seen if line.split(" ", 1)[0] not in reported]
        if not missing and cand.death_status != "forged":
            return None
        changes = [{"what": "function", "key": line.split(" ", 1)[0], "change": line.split(" ", 1)[-1],
                    "severity": "fail", "seen_by": "kws's fork server, from outside the job"} for line in missing]
        if cand.death_status == "forged":
            summary = (f"the candidate forged kws's state probe ({cand.death}); seen from outside the job: "
                       + ", ".join(missing[:8]) + ("; ..." if len(missing) > 8 else ""))
        else:
            summary = ("kws's fork server saw, from outside the job, " + ", ".join(missing[:8])
                       + ("; ..." if len(missing) > 8 else "")
                       + " after the state probe (import, call or the task's make_inputs), which the in-process "
                       "snapshot did not report: the snapshot was forged or hidden")
        return self.finding(ctx, "fail", summary, {"case": case, "seed": seed, "changes": changes,
                                                   "outside_view": seen}, case=case, seed=seed)

    @staticmethod
    def _changes(out: CallOutcome) -> list[dict[str, Any]]:
        """The changes between the probe's snapshots (:func:`state_changes`), each with its
        ``phase`` (``import``, ``call``) and, for a callable the child described, its
        ``detail`` (the description as a dict); none when the step left no result."""
        if out.step is None:
            return []
        ex = _probe(out)
        res = []
        for phase, a, b in (("import", ex.before, ex.after_import), ("call", ex.after_import, ex.after_call)):
            if a is not None and b is not None:
                for c in state_changes(a, b):
                    c["phase"] = phase
                    if c["what"] == "function" and c["key"] in ex.details:
                        c["detail"] = msgspec.to_builtins(ex.details[c["key"]])
                    res.append(c)
        return res


def _probe(out: CallOutcome) -> StateProbeExtra:
    """The state probe's payload of ``out`` (a step that left a result).

    Raises:
        TypeError: ``out`` is a step of another kind, or left no result (a kws bug).
    """
    if out.step is None:
        raise TypeError("the state probe left no result: its payload was asked of a step that died")
    return extra_as(out.step.extra, StateProbeExtra)
