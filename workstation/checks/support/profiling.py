"""kws's own profile of a task (parent side), shared by ``profile`` and ``profile-attached``.

:func:`self_profile` runs the ``profile`` harness step (:mod:`workstation.harness.profile`)
for the candidate and for the baseline (the reference when there is none), each in a
child of its own, on one case (:func:`profile_case`), and memoises the result per engine
run. On a GPU the jobs are exclusive (nothing else runs on the device meanwhile: kernel
durations are the kernel's own) and the step profiles several calls after warm-up; on the
CPU one call after one warm-up call, and Triton kernels are known from launch tracing
only (the interpreter runs them as Python: no durations, no time shares).

Which kernels are the candidate's own (:func:`own_kernel_names`): the Triton kernels its
calls launched (launch tracing), the ``@triton.jit`` functions of its source files, and for
a ``cuda`` candidate the ``__global__`` functions in its sources. Framework ops the task
lets the candidate delegate to are its ``[delegation] ops`` (kws extension,
``Task.extensions.delegates``; the same list ``fallback`` honours).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from workstation.checks.support.static import aten_family
from workstation.checks.support.timing import largest_case
from workstation.engine.context import CallOutcome, CheckContext
from workstation.profiles.model import KernelStat, Profile
from workstation.profiles.torchtrace import parse_chrome_trace
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.monitors import TritonLaunchesReport
from workstation.protocol.extras.timing import ProfileExtra, Workload
from workstation.protocol.steps import ProfileStep, Role
from workstation.task.model import Task

#: profiled calls (after warm-up calls) on a GPU and on the CPU.
GPU_CALLS, GPU_WARMUP = 5, 3
CPU_CALLS, CPU_WARMUP = 1, 1
_GLOBAL_RE = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+"
                        r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)")


@dataclass
class RoleRun:
    """One role's profile step: the outcome, the parsed profile (``None`` when the call
    failed or the profiler could not run and nothing was traced), the launch-tracing
    reports of the profiled and the warm-up calls, and the case's workload."""

    role: str
    outcome: CallOutcome
    profile: Profile | None = None
    launches: TritonLaunchesReport = field(default_factory=TritonLaunchesReport)
    warmup_launches: TritonLaunchesReport = field(default_factory=TritonLaunchesReport)
    workload: Workload | None = None
    profiler_error: str = ""
    interpreter: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome.ok


@dataclass
class SelfProfile:
    """kws's profile of the candidate and its comparison side on one case."""

    case: dict[str, Any]
    seed: int
    case_source: str
    on_gpu: bool
    device: str
    candidate: RoleRun
    other: RoleRun | None
    own_names: list[str]
    delegated: list[str]

    @property
    def time_shares(self) -> bool:
        """Durations are kernel durations (a GPU profile), so shares may be judged."""
        c = self.candidate.profile
        return self.on_gpu and c is not None and c.timed


def delegated_ops(task: Task) -> list[str]:
    """The framework ops the task lets the candidate delegate to: its ``[delegation] ops``,
    as written (``aten::mm``, ``matmul``; :func:`workstation.profiles.analysis.op_base`
    normalises them)."""
    return [str(x) for x in task.extensions.delegates]


def profile_case(ctx: CheckContext) -> tuple[dict[str, Any], str]:
    """The case kws profiles: ``--case`` when given; on a GPU the first ``[benchmark]``
    case (else the largest declared case), where the speed claim is made; on the CPU the
    first declared case (the Triton interpreter is slow)."""
    if ctx.case_filter:
        return dict(ctx.case_filter), "--case"
    if ctx.on_gpu:
        if ctx.task.benchmark_cases:
            return dict(ctx.task.benchmark_cases[0]), "the first [benchmark] case"
        return dict(largest_case(ctx.task.cases)), "the largest declared case"
    return dict(ctx.cases[0]), "the first declared case"


def own_kernel_names(ctx: CheckContext) -> list[str]:
    """Kernel names the candidate's own sources define: ``@triton.jit`` functions of its
    files, ``__global__`` functions in its Python files (extension sources in strings) and
    in the task's ``.cu``/``.cuh`` files."""
    ep = ctx.task.entry["candidate"]
    names: set[str] = set()
    for sf, _ in ctx.sources.closure(ep.file, exclude=[ctx.task.entry["reference"].file]):
        for name, node in sf.top_level_defs().items():
            if sf.is_kernel_def(node):
                names.add(name)
        names.update(_GLOBAL_RE.findall(sf.source))
    if ctx.task.backend == "cuda":
        for p in sorted(ctx.task.dir.glob("*.cu*")):
            if p.suffix in (".cu", ".cuh") and p.stat().st_size < (1 << 20):
                names.update(_GLOBAL_RE.findall(p.read_text(encoding="utf-8", errors="replace")))
    return sorted(names)


def _run(ctx: CheckContext, spec: ProfileStep, exclusive: bool) -> CallOutcome:
    job = ctx.run_job([spec], exclusive=exclusive)
    st = job.steps[0] if job.steps else None
    if st is None:
        return CallOutcome(spec, None, death=job.describe_death(), death_status=job.status,
                           signal_name=job.signal_name, stdout_tail=job.stdout_tail, stderr_tail=job.stderr_tail,
                           stdout_bytes=job.stdout_bytes)
    return CallOutcome(spec, st, stdout_tail=job.stdout_tail, stderr_tail=job.stderr_tail,
                       stdout_bytes=job.stdout_bytes)


def role_run(role: str, out: CallOutcome) -> RoleRun:
    """A :class:`RoleRun` from a profile step's outcome: the child's trace parsed as a
    Chrome trace; on the CPU the Triton kernels launch tracing counted join the kernel
    list (no durations: the interpreter's kernels are not profiler events)."""
    rr = RoleRun(role=role, outcome=out)
    if not out.ok or out.step is None:
        return rr
    ex = extra_as(out.step.extra, ProfileExtra)
    rr.launches = ex.launches
    rr.warmup_launches = ex.warmup_launches
    rr.workload = ex.workload
    rr.profiler_error = ex.profiler_error
    rr.interpreter = ex.interpreter
    calls = ex.calls or 1
    trace = ex.trace
    try:
        prof = parse_chrome_trace(trace.chrome(), source="kws", role=role, calls=calls) if trace is not None else \
            Profile(source="kws", format="kws", role=role, calls=calls, device_kind="cpu",
                    notes=(f"torch.profiler did not run: {rr.profiler_error}",))
    except ValueError as e:
        prof = Profile(source="kws", format="kws", role=role, calls=calls, notes=(f"unreadable trace: {e}",))
    prof = replace(prof, format="kws", calls=max(1, calls))
    if not prof.timed:
        traced = tuple(KernelStat(name=n, kind="kernel", count=int(c)) for n, c in
                       sorted(rr.launches.kernels.items(), key=lambda kv: -kv[1]))
        prof = replace(prof, kernels=traced + prof.kernels, launches=None, device_kind=prof.device_kind or "cpu")
    rr.profile = prof
    return rr


def self_profile(ctx: CheckContext) -> SelfProfile:
    """kws's profile of the task (module doc), once per engine run."""
    return ctx.stash.once(SelfProfile, lambda: _self_profile(ctx))


def _self_profile(ctx: CheckContext) -> SelfProfile:
    case, src = profile_case(ctx)
    seed = ctx.seeds[0] if ctx.seeds else 0
    gpu = ctx.on_gpu
    calls, warm = (GPU_CALLS, GPU_WARMUP) if gpu else (CPU_CALLS, CPU_WARMUP)
    other_role: Role = "baseline" if "baseline" in ctx.task.entry else "reference"
    runs = {}
    roles: tuple[Role, Role] = ("candidate", other_role)
    for role in roles:  # separate children: one role cannot touch the other
        spec = ProfileStep(role=role, case=dict(case), seed=seed, warmup=warm, calls=calls,
                           workload=role == "candidate")
        runs[role] = role_run(role, _run(ctx, spec, exclusive=gpu))
    cand = runs["candidate"]
    own = set(own_kernel_names(ctx)) | set(cand.launches.kernels)
    own |= set(cand.warmup_launches.kernels)
    return SelfProfile(case=case, seed=seed, case_source=src, on_gpu=gpu, device=ctx.device.label,
                       candidate=cand, other=runs[other_role], own_names=sorted(own),
                       delegated=delegated_ops(ctx.task))


def fmt_ns(ns: float | None) -> str:
    """``1234.5`` -> ``"1.23 us"``."""
    if ns is None:
        return "?"
    for unit, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= f:
            return f"{ns / f:.3g} {unit}"
    return f"{ns:.3g} ns"


def family_of(op: str) -> str | None:
    """The op family (matmul, softmax, norm...) of an aten op's base name."""
    return aten_family(op)
