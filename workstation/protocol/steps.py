"""The job a parent sends a child: typed steps, input transforms and call monitors.

A *job* (:class:`Job`) is the task copy, the task's entry points and argument roles, the
device, and a list of *steps* run in order in one child. Every step, transform and monitor
is a frozen :class:`msgspec.Struct` that rejects unknown fields; its kind travels in a tag
field, spelled in snake_case:

- steps (tag ``kind``): ``call``, ``author_test``, ``guarded_call``, ``sanitizer_call``,
  ``inputs_only``, ``repeat_call``, ``hashseed_call``, ``stale_call``, ``call_series``, ``fault_call``,
  ``state_probe``, ``autotune_probe``, ``num_oracle``, ``triton_aot``, ``triton_bounds``, ``timing``,
  ``torch_timer``, ``author_bench``, ``profile``, ``pallas_read``, ``cuda_build``;
- transforms (tag ``name``; applied in order to a step's inputs after ``make_inputs``):
  ``upcast``, ``cast``, ``layout``, ``magnitude``, ``signed_zeros``, ``tiny``,
  ``nonfinite``, ``perturb``, ``diverse``, ``rescale``, ``num_fresh``, ``num_tf32``;
- monitors (tag ``name``; context managers around a ``call`` step's call, each reporting
  into the field of its name of ``extra.monitors``,
  :class:`~workstation.protocol.extras.monitors.MonitorReports`): ``aten_ops``,
  ``triton_launches``, ``triton_launch_records``, ``num_callers``, ``keep_float64``,
  ``poison_masked_loads``, ``poison_stores``, ``contract_round``, ``pallas_calls``, ``pallas_strict``.

Life of a job: checks build the Structs (fields are keyword-only: a misspelled one is a
``TypeError`` at once, in the parent); the runner writes :func:`encode_job`'s JSON as the
job file (dict keys in insertion order, numpy scalars as their Python values), which first
decodes the encoding back against :class:`Job` and compares it with the job it was given,
so a wrong type or value (a role that does not exist, a dict where a transform Struct
belongs, a list where a tuple belongs) is a :class:`StepError` naming the step before any
child starts; the child decodes the file with :func:`read_job` and dispatches each step,
transform and monitor on its Struct type to the handler a harness module registered for
it (a step type without a handler is a ``KwsError`` step result). :func:`memo_key` is the
step's deterministic JSON (dict keys sorted): equal steps share one result in the parent.

Adding a kind: a Struct subclass of ``_Step`` (``_Transform``, ``_Monitor``) with
``tag="<snake_case name>", kw_only=True`` and documented fields, added to the :data:`Step`
(:data:`Transform`, :data:`Monitor`) union; its handler is registered in a harness module
with ``@step(TheStep)`` (``@transform``, ``@monitor``).

Cases are the task's case tables (``{"M": 64, "dtype": "float16"}``); seeds are the
``seed`` argument of the task's ``make_inputs(case, device, seed)``; ``args`` and ``skip``
lists hold positional input indices. Which role a step runs and what it sends back (its
``extra`` and arrays, see :mod:`workstation.protocol.wire`) is documented on the handler
in the harness module that registers it.

Torch-free: the parent imports it.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec
import numpy as np

from workstation.protocol.monitors import (
    AtenOps as AtenOps,
)
from workstation.protocol.monitors import (
    ContractRound as ContractRound,
)
from workstation.protocol.monitors import (
    KeepFloat64 as KeepFloat64,
)
from workstation.protocol.monitors import (
    Monitor as Monitor,
)
from workstation.protocol.monitors import (
    NumCallers as NumCallers,
)
from workstation.protocol.monitors import (
    PallasCalls as PallasCalls,
)
from workstation.protocol.monitors import (
    PallasStrict as PallasStrict,
)
from workstation.protocol.monitors import (
    PoisonMaskedLoads as PoisonMaskedLoads,
)
from workstation.protocol.monitors import (
    PoisonStores as PoisonStores,
)
from workstation.protocol.monitors import (
    TritonLaunches as TritonLaunches,
)
from workstation.protocol.monitors import (
    TritonLaunchRecords as TritonLaunchRecords,
)
from workstation.protocol.monitors import (  # re-exported: the job names them
    _Monitor as _Monitor,
)
from workstation.protocol.transforms import (
    Cast as Cast,
)
from workstation.protocol.transforms import (
    Diverse as Diverse,
)
from workstation.protocol.transforms import (
    Layout as Layout,
)
from workstation.protocol.transforms import (
    LayoutKind as LayoutKind,
)
from workstation.protocol.transforms import (
    Magnitude as Magnitude,
)
from workstation.protocol.transforms import (
    Nonfinite as Nonfinite,
)
from workstation.protocol.transforms import (
    NumFresh as NumFresh,
)
from workstation.protocol.transforms import (
    NumTf32 as NumTf32,
)
from workstation.protocol.transforms import (
    Perturb as Perturb,
)
from workstation.protocol.transforms import (
    Rescale as Rescale,
)
from workstation.protocol.transforms import (
    Sign as Sign,
)
from workstation.protocol.transforms import (
    SignedZeros as SignedZeros,
)
from workstation.protocol.transforms import (
    Splice as Splice,
)
from workstation.protocol.transforms import (
    StructureKind as StructureKind,
)
from workstation.protocol.transforms import (
    Tiny as Tiny,
)
from workstation.protocol.transforms import (
    Transform as Transform,
)
from workstation.protocol.transforms import (
    Upcast as Upcast,
)
from workstation.protocol.transforms import (
    ValueTransform as ValueTransform,
)
from workstation.protocol.transforms import (  # re-exported: the job names them
    _Transform as _Transform,
)

#: a callable role a step runs (an entry point of the task).
Role = Literal["candidate", "reference", "baseline"]
#: one case table: parameter name -> scalar value (``dtype`` is the primary input dtype).
Case = dict[str, int | float | str | bool]
#: an AOT compile target: (backend, compute capability as an int such as 90, warp size).
Target = tuple[str, int, int]


class StepError(ValueError):
    """A job whose steps do not have the declared form (a kws bug in the parent)."""


# ----------------------------------------------------------------------------- steps


class _Step(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="kind"):
    """Base of the steps."""


class CallStep(_Step, tag="call", frozen=True, kw_only=True):
    """Make the inputs of ``case``/``seed``, apply ``transforms`` in order, call ``role``
    ``repeat`` times on them inside ``monitors``; ``send_inputs``: also send the inputs
    as they are after the call (:mod:`workstation.harness.core`)."""

    role: Role
    case: Case
    seed: int = 0
    transforms: list[Transform] = []
    monitors: list[Monitor] = []
    repeat: int = 1
    send_inputs: bool = False


class AuthorTestStep(_Step, tag="author_test", frozen=True, kw_only=True):
    """Run the author's ``check(case, device, seed)`` (:mod:`workstation.harness.core`)."""

    case: Case
    seed: int = 0


class GuardedCallStep(_Step, tag="guarded_call", frozen=True, kw_only=True):
    """Call ``role`` with poisoned, guard-banded inputs and allocations: ``scenario``
    picks the poison (:data:`workstation.protocol.sentinels.POISON`), ``guard`` adds the
    guard bands (:mod:`workstation.harness.guards`)."""

    role: Role
    case: Case
    seed: int = 0
    transforms: list[Transform] = []
    scenario: Literal["A", "B"] = "A"
    guard: bool = True


class SanitizerCallStep(_Step, tag="sanitizer_call", frozen=True, kw_only=True):
    """One call of ``role`` under compute-sanitizer's memcheck in a fresh interpreter
    (CUDA only), killed after ``timeout`` seconds (:mod:`workstation.harness.guards`)."""

    role: Role = "candidate"
    case: Case
    seed: int = 0
    timeout: float = 240.0


class InputsOnlyStep(_Step, tag="inputs_only", frozen=True, kw_only=True):
    """Send the (transformed) inputs of ``case``/``seed``, calling nothing
    (:mod:`workstation.harness.probes`)."""

    case: Case
    seed: int = 0
    transforms: list[Transform] = []


class RepeatCallStep(_Step, tag="repeat_call", frozen=True, kw_only=True):
    """Call ``role`` ``n`` times, each on a fresh clone of the same inputs
    (:mod:`workstation.harness.probes`)."""

    role: Role
    case: Case
    seed: int = 0
    transforms: list[Transform] = []
    n: int = 3


class HashseedCallStep(_Step, tag="hashseed_call", frozen=True, kw_only=True):
    """One plain call in a fresh interpreter started with ``PYTHONHASHSEED=hashseed``,
    killed after ``timeout`` seconds (:mod:`workstation.harness.probes`)."""

    role: Role
    case: Case
    seed: int = 0
    transforms: list[Transform] = []
    hashseed: int = 0
    timeout: float = 300.0


class StaleCallStep(_Step, tag="stale_call", frozen=True, kw_only=True):
    """Call ``role`` on the inputs of ``seed_a``, copy the values of ``seed_b`` into the
    same input tensors in place, call again (:mod:`workstation.harness.probes`)."""

    role: Role
    case: Case
    seed_a: int
    seed_b: int
    transforms: list[Transform] = []


class CallSeriesStep(_Step, tag="call_series", frozen=True, kw_only=True):
    """Call ``role`` ``serial`` times, each on fresh copies of the inputs of ``seed_a``,
    fingerprinting its outputs right after return and again after a synchronize, a
    ``settle_s`` wait (s) and a second synchronize, with a census of threads around each
    call; then ``loop`` calls back to back without a synchronize, alternating fresh copies
    of the inputs of ``seed_a`` and ``seed_b``, keeping one call chosen at random (the audit)
    and the last (:mod:`workstation.harness.series`)."""

    role: Role
    case: Case
    seed_a: int
    seed_b: int
    transforms: list[Transform] = []
    serial: int = 12
    loop: int = 12
    settle_s: float = 0.02


#: how the audit delivers a variant's values to the role (:mod:`workstation.harness.audit`).
AuditPath = Literal["fresh", "inplace", "data", "numpy", "storage", "recycled", "clone"]
#: where the audit calls the role from (:mod:`workstation.harness.audit`).
AuditContext = Literal["plain", "dispatch", "function_mode", "profiler", "setprofile", "frame", "quick", "pause",
                       "loop", "clock"]


class AuditSeriesStep(_Step, tag="audit_series", frozen=True, kw_only=True):
    """The invariant audit of one role on one case (:mod:`workstation.harness.audit`): the
    role is called ``calls`` times on *variants* of the inputs (every element new: the
    inputs of another of ``seeds``; or a few elements edited at places the child draws),
    each delivered through one of ``paths`` and called from one of ``contexts``, in an order
    the child draws at run time; halfway, ``long_run`` plain calls on fresh copies. Outputs
    of ``keep`` early calls are held and read again at the end, after ``settle_s`` seconds;
    a process census runs around every call.

    Attributes:
        role: whose code is audited.
        case: the case (the smallest declared one: many calls).
        seeds: the seeds whose inputs are the whole-input variants (the first is the base
            the edits start from).
        calls: mixed calls (variants x paths x contexts), half before the long run, half
            after.
        long_run: plain calls in a row on fresh copies (longer than any loop of the run).
        keep: early outputs held and read again at the end.
        settle_s: wait (s) before the held outputs are read again.
        paths, contexts: what the child draws from.
    """

    role: Role = "candidate"
    case: Case
    seeds: list[int]
    calls: int = 32
    long_run: int = 48
    keep: int = 4
    settle_s: float = 0.05
    paths: tuple[AuditPath, ...] = ("fresh", "inplace", "data", "numpy", "storage", "recycled", "clone")
    contexts: tuple[AuditContext, ...] = ("plain", "dispatch", "function_mode", "profiler", "setprofile", "frame",
                                          "quick", "pause", "loop", "clock")


class FaultCallStep(_Step, tag="fault_call", frozen=True, kw_only=True):
    """One call of ``role`` with ``fault`` injected: every Triton launch raises
    (``triton_launch``) or every C++/CUDA extension build raises (``extension_build``)
    (:mod:`workstation.harness.trace`)."""

    role: Role
    case: Case
    seed: int = 0
    transforms: list[Transform] = []
    fault: Literal["triton_launch", "extension_build"] = "triton_launch"


class StateProbeStep(_Step, tag="state_probe", frozen=True, kw_only=True):
    """Snapshots of process-global state before import, after import and after one call
    of ``role`` (:mod:`workstation.harness.state`)."""

    role: Role
    case: Case
    seed: int = 0


class AutotuneProbeStep(_Step, tag="autotune_probe", frozen=True, kw_only=True):
    """Drive the candidate's autotuners on every case of ``cases`` (tuned call, cached
    call, one call per config) (:mod:`workstation.harness.autotune`)."""

    cases: list[Case]
    seed: int = 0


class NumOracleStep(_Step, tag="num_oracle", frozen=True, kw_only=True):
    """The float64 oracle of ``case``/``seed`` (the reference on upcast inputs) and the
    error-budget probes: ``scale`` (each floating input doubled), ``abs`` (``|inputs|``),
    ``bump`` (one element moved by a relative 2^-20); ``skip``: inputs the probes leave
    alone (:mod:`workstation.harness.numerics`)."""

    case: Case
    seed: int = 0
    abs: bool = False
    scale: bool = False
    bump: bool = False
    skip: list[int] = []


class InterpreterSelftestStep(_Step, tag="interpreter_selftest", frozen=True, kw_only=True):
    """The interpreter fidelity self-test (:mod:`workstation.harness.selftest`): which
    dtypes the Triton interpreter computes right under kws's fidelity layer."""


class TritonAotStep(_Step, tag="triton_aot", frozen=True, kw_only=True):
    """Capture the candidate's Triton launches on every case of ``cases`` and read their
    IR compiled for ``targets`` (``None``: sm_90) (:mod:`workstation.harness.aot`)."""

    cases: list[Case]
    seed: int = 0
    targets: list[Target] | None = None


class TritonBoundsStep(_Step, tag="triton_bounds", frozen=True, kw_only=True):
    """Call the candidate on every case of ``cases`` recording each Triton launch's grid,
    scalar arguments and tensor arguments (shape, strides, footprint, which are outputs),
    and the TTIR of each distinct launch compiled without a GPU
    (:mod:`workstation.harness.bounds`; the ``bounds-proof`` check). ``lower`` False: the
    launches only, no TTIR (``size-range``'s dry run: how many programs each case launches)."""

    cases: list[Case]
    seed: int = 0
    lower: bool = True


class TimingSide(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One timed callable of a ``timing`` step: ``name`` labels its samples, ``role`` is the
    entry point, ``compile`` wraps it in ``torch.compile``."""

    name: str
    role: Role
    compile: bool = False


class TimingStep(_Step, tag="timing", frozen=True, kw_only=True):
    """Time ``sides`` interleaved on every case of ``cases`` (:mod:`workstation.harness.timing`).

    ``params`` overrides the protocol's per-device defaults (``target_stdrel``,
    ``min_samples``, ``time_cap_s``, ...); ``compile_timeout_s``: time box of a
    ``torch.compile`` first call (s); ``cache_bytes``: the cache size a flush evicts
    (bytes; ``None``: measured); ``stop_if_interpreted``: stop sampling a side whose calls
    launch Triton kernels under the interpreter; ``workload``: measure bytes and flops of
    one call; ``bandwidth``: measure the copy bandwidth.
    """

    cases: list[Case]
    seed: int = 0
    sides: list[TimingSide]
    params: dict[str, int | float] = {}
    compile_timeout_s: float = 60.0
    cache_bytes: int | None = None
    stop_if_interpreted: bool = False
    workload: bool = False
    bandwidth: bool = False


class TorchTimerStep(_Step, tag="torch_timer", frozen=True, kw_only=True):
    """``torch.utils.benchmark.Timer.blocked_autorange(min_run_time)`` (s) on ``role``
    (:mod:`workstation.harness.timing`)."""

    role: Role = "candidate"
    case: Case
    seed: int = 0
    min_run_time: float = 0.2


class AuthorBenchStep(_Step, tag="author_bench", frozen=True, kw_only=True):
    """Run the author's ``run(case, device)``, traced when ``trace``; ``baseline_role`` is
    the entry point the bench times against the candidate
    (:mod:`workstation.harness.authorbench`)."""

    case: Case
    baseline_role: Role = "baseline"
    trace: bool = True


class ProfileStep(_Step, tag="profile", frozen=True, kw_only=True):
    """Profile ``role`` on ``case``/``seed``: ``warmup`` calls first (not profiled: they
    absorb compilation and autotuning), then ``calls`` calls under ``torch.profiler``
    (host ops, and device kernels on CUDA), each in a ``kws#call`` annotation, with Triton
    launches traced; at most ``max_events`` trace events are sent back; ``workload``: also
    measure the case's bytes and flops (:mod:`workstation.harness.profile`)."""

    role: Role
    case: Case
    seed: int = 0
    warmup: int = 1
    calls: int = 1
    workload: bool = False
    max_events: int = 50_000


class PallasReadStep(_Step, tag="pallas_read", frozen=True, kw_only=True):
    """Run the candidate once per case of ``cases`` and read the jaxpr of every distinct
    ``pallas_call`` it makes (``jax.make_jaxpr``, no extra execution): grid, block specs and
    how the output blocks cover the output, partial input blocks, scratch buffers,
    ``dot_general`` operand and ``preferred_element_type`` dtypes, read-modify-write
    accumulations and their dtypes (:mod:`workstation.harness.pallas`)."""

    cases: list[Case]
    seed: int = 0


class CudaBuildStep(_Step, tag="cuda_build", frozen=True, kw_only=True):
    """Capture the CUDA/C++ sources ``role`` builds with ``torch.utils.cpp_extension``
    (``load_inline`` / ``load``) without building them (the role's module is imported and,
    when the build is lazy, called once on ``case``), then compile each CUDA source with
    nvcc for ``arch`` (``None``: ``sm_90``, ``sm_90a`` where the source uses ``wgmma``; an
    ``-arch``/``-gencode`` the build's own flags give wins) to a cubin with ``-Xptxas -v``
    and read PTX and SASS; each nvcc run is killed after ``timeout`` seconds
    (:mod:`workstation.harness.cuda_capture`)."""

    role: Role = "candidate"
    case: Case
    seed: int = 0
    arch: str | None = None
    timeout: float = 180.0


Step = (CallStep | AuthorTestStep | GuardedCallStep | SanitizerCallStep | InputsOnlyStep | RepeatCallStep
        | HashseedCallStep | StaleCallStep | CallSeriesStep | AuditSeriesStep | FaultCallStep | StateProbeStep
        | AutotuneProbeStep | NumOracleStep | TritonAotStep | TritonBoundsStep | TimingStep | TorchTimerStep
        | AuthorBenchStep | ProfileStep | PallasReadStep | CudaBuildStep | InterpreterSelftestStep)


def step_roles(step: _Step) -> set[str]:
    """The task roles whose code a step runs (``candidate``, ``reference``, ``baseline``):
    the author's test and benchmark call the candidate; a ``cuda_build`` step only captures
    and compiles sources, so it runs on a machine where the role itself cannot."""
    if isinstance(step, CudaBuildStep | InputsOnlyStep):
        return set()
    if isinstance(step, TimingStep):
        return {s.role for s in step.sides}
    if isinstance(step, AuthorBenchStep):
        return {"candidate", step.baseline_role}
    if isinstance(step, AuthorTestStep | AutotuneProbeStep | TritonAotStep | TritonBoundsStep | PallasReadStep):
        return {"candidate"}
    if isinstance(step, NumOracleStep):
        return {"reference"}
    role = getattr(step, "role", None)
    return {role} if isinstance(role, str) else set()


class Job(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One child's work (the job file).

    Attributes:
        entry: role -> ``"file.py:function"`` (``candidate``, ``reference``, ``inputs``, ...).
        out_args, inout_args: indices of the inputs the callables write (write-only,
            read-write); their values are the outputs.
        task_dir: the task copy the child runs in (absolute path).
        out_dir: where the child writes ``step-<i>.*`` (absolute path).
        device: ``"cpu"`` or ``"cuda"``.
        steps: run in order.
        helper_dirs: folders put on ``sys.path`` after the task copy (a queue's shared
            helper folder, ``queue.toml`` ``helpers``; read-only to the task).
        target: the task's ``[target] device`` as the parent's task loader read and
            validated it (a name of :data:`workstation.protocol.devices.DEVICE_TARGETS`), or
            ``None`` when it declares none: the device stand-in answers as that GPU.
    """

    entry: dict[str, str] = {}
    out_args: list[int] = []
    inout_args: list[int] = []
    task_dir: str
    out_dir: str
    device: Literal["cpu", "cuda"] = "cpu"
    steps: list[Step]
    helper_dirs: list[str] = []
    target: str | None = None


# ----------------------------------------------------------------------------- principals

#: the principal of the steps that run no single role's code (see :func:`principal`).
_PRINCIPALS: dict[type, str] = {NumOracleStep: "reference", AutotuneProbeStep: "candidate",
                                TritonAotStep: "candidate", TritonBoundsStep: "candidate", AuthorTestStep: "test", AuthorBenchStep: "bench",
                                InputsOnlyStep: "inputs", TimingStep: "timing"}


def principal(step: _Step) -> str:
    """Whose task code a step runs: its ``role`` (``candidate``, ``reference``,
    ``baseline``), ``reference`` for the float64 oracle, ``candidate`` for the autotune and
    AOT probes, ``test`` / ``bench`` for the author's test and benchmark (they call what
    they like), ``inputs`` for ``inputs_only``, ``timing`` for a timing step (its sides are
    timed interleaved in one process, by design: the measurement needs it).

    A job runs the steps of one principal only, so a candidate and a reference never share
    a process (:meth:`workstation.engine.context.CheckContext.run_steps`).
    """
    role = getattr(step, "role", None)
    if isinstance(role, str):
        return role
    return _PRINCIPALS.get(type(step), kind_of(step))


# ----------------------------------------------------------------------------- encoding


def kind_of(spec: _Step | _Transform | _Monitor | type) -> str:
    """The tag of a step, transform or monitor, or of its type (``"call"``, ``"upcast"``,
    ``"aten_ops"``): the field of a monitor's report in ``extra.monitors``."""
    cls: type[msgspec.Struct] = spec if isinstance(spec, type) else type(spec)
    return str(cls.__struct_config__.tag)


def _enc_hook(obj: object) -> object:
    """numpy scalars (values checks compute) encode as their Python value."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def memo_key(step: _Step) -> str:
    """The deterministic JSON of ``step`` (struct fields in order, dict keys sorted)."""
    return msgspec.json.encode(step, enc_hook=_enc_hook, order="deterministic").decode()


_STEP_AT = re.compile(r"\$\.steps\[(\d+)\]")


def encode_job(job: Job) -> bytes:
    """``job`` as JSON, checked by decoding it back against :class:`Job`.

    Raises:
        StepError: a field holds a value its type does not admit (the message names the
            step index, its kind and the field path) or one JSON cannot encode.
    """
    for i, step in enumerate(job.steps):
        if not isinstance(step, _Step):
            raise StepError(f"step {i}: {type(step).__name__} is not a step")
    try:
        data = msgspec.json.encode(job, enc_hook=_enc_hook)
    except (TypeError, NotImplementedError) as e:
        bad = next((i for i, s in enumerate(job.steps) if not _encodes(s)), None)
        where = "job" if bad is None else f"step {bad} ({kind_of(job.steps[bad])})"
        raise StepError(f"{where}: {e}") from None
    try:
        back = msgspec.json.decode(data, type=Job)
    except msgspec.ValidationError as e:
        m = _STEP_AT.search(str(e))
        where = f"step {m.group(1)} ({kind_of(job.steps[int(m.group(1))])})" if m else "job"
        raise StepError(f"{where}: {e}") from None
    for i, (sent, got) in enumerate(zip(job.steps, back.steps, strict=True)):
        if sent != got:  # e.g. a dict where a transform Struct belongs, a tuple for a list
            raise StepError(f"step {i} ({kind_of(sent)}): a field holds another type than declared: "
                            f"{sent!r} decodes as {got!r}")
    return data


def _encodes(step: _Step) -> bool:
    try:
        msgspec.json.encode(step, enc_hook=_enc_hook)
    except (TypeError, NotImplementedError):
        return False
    return True


def read_job(path: str) -> Job:
    """Decode the job file at ``path``.

    Raises:
        msgspec.ValidationError: the file does not hold a :class:`Job`.
    """
    with open(path, "rb") as f:
        return msgspec.json.decode(f.read(), type=Job)
