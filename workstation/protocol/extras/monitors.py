"""What each call monitor observed (:data:`workstation.protocol.steps.Monitor`), typed: one
report Struct per monitor kind, gathered in :class:`MonitorReports` (a ``call`` step's
``extra.monitors``; the ``num_oracle`` step's too).

A monitor's handler (``@monitor(Spec, Report)`` in :mod:`workstation.harness`) is handed an
empty report of its kind before the call and fills its attributes while the call runs, so
every top-level report field has a default. Nested objects that the harness always writes
whole (an aten op's count, a Pallas kernel's tally) have required fields; a field the
harness writes only in some cases (a profiler error, GPU compiler params set aside) is
omitted from the encoding when it holds its default (``omit_defaults``), so a finding's
evidence built from such an object (``msgspec.to_builtins``) has the keys the harness's
dictionaries always had.

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

from typing import TypeVar

from workstation.protocol.results import Payload

R = TypeVar("R", bound=Payload)


class Site(Payload):
    """The innermost task-code frame of a call stack: ``file`` relative to the task folder,
    ``line``, ``function``."""

    file: str
    line: int
    function: str


# ----------------------------------------------------------------------------- aten_ops


class AtenOpCount(Payload):
    """One aten op the dispatch-mode tracer saw (the outermost call of each op).

    Attributes:
        count: how many times it was dispatched.
        max_numel: the largest tensor among its arguments and results (elements).
        site: the first task-code frame that issued it (None: outside the task's code).
    """

    count: int
    max_numel: int
    site: Site | None


class ProfiledOpCount(Payload):
    """One top-level aten op (no aten parent) the autograd profiler recorded: ``count``,
    ``max_numel`` (the largest input, elements)."""

    count: int
    max_numel: int


class AtenProfile(Payload, omit_defaults=True, kw_only=True):
    """What kws's independent recorder (the autograd profiler, ``RecordFunction`` callbacks
    in the dispatcher) saw during the call.

    Attributes:
        mode_removed: the dispatch-mode tracer was no longer on the mode stack when the call
            returned (task code took it off).
        stopped: the profiler was no longer running when the call returned.
        error: closing the profiler session raised (``"Type: message"``, at most 200
            characters of the message; "" when it did not, and then not encoded).
        marker: kws's opening marker event is among the recorded events (False: the
            session was replaced).
        events: how many events were recorded.
        ops: aten op name (``"mm"``) -> its top-level calls.
    """

    mode_removed: bool
    stopped: bool
    error: str = ""
    marker: bool
    events: int
    ops: dict[str, ProfiledOpCount]


class AtenOpsReport(Payload):
    """The ``aten_ops`` monitor (:mod:`workstation.harness.trace`): ``ops``, aten op name
    (``"gelu"``, without the ``aten.`` prefix) -> what the dispatch-mode tracer saw;
    ``profiler``, what the independent recorder saw (None when it did not report)."""

    ops: dict[str, AtenOpCount] = {}
    profiler: AtenProfile | None = None


# ----------------------------------------------------------------------------- Triton launches


class TritonLaunchesReport(Payload):
    """The ``triton_launches`` monitor (:mod:`workstation.harness.trace`): launches of
    ``@triton.jit`` kernels seen through kws's one launch wrapper.

    Attributes:
        kernels: kernel name -> launches that returned.
        launches: their total.
        failed: kernel name -> launches that raised (a compile error, an injected fault).
        failed_launches: their total.
        errors: the first four failures (``"name: Type: message"``).
        warmups: compile-only warm-up launches.
        hooked: the launcher classes kws wrapped (``"JITFunction"``, ...).
    """

    kernels: dict[str, int] = {}
    launches: int = 0
    failed: dict[str, int] = {}
    failed_launches: int = 0
    errors: list[str] = []
    warmups: int = 0
    hooked: list[str] = []


#: a constexpr argument's value as JSON: a scalar, ``{"tl_dtype": "fp16"}`` for a Triton
#: dtype, ``{"repr": "..."}`` (at most 200 characters) for anything else.
ConstexprValue = None | bool | int | float | str | dict[str, str]


class LaunchRecord(Payload):
    """What one distinct Triton launch needs for an ahead-of-time compile
    (:func:`workstation.harness.aot_capture.launch_record`).

    Attributes:
        file: the kernel's source file (an absolute path in the child in the monitor report; relative to the task folder when it lies in it in the ``triton_aot`` and ``triton_bounds`` payloads).
        qualname, name: the kernel function's qualified and plain name.
        line: the ``def`` line (None when unknown).
        signature: argument name -> Triton signature type (``*fp16``, ``i32``, ``fp32``,
            ``constexpr``).
        constexprs: constexpr argument name -> its value (:data:`ConstexprValue`).
        options: launch options that are compile options (``num_warps``, ``num_stages``,
            ``num_ctas``, ``maxnreg``: int; ``enable_fp_fusion``: bool).
    """

    file: str = ""
    qualname: str = ""
    name: str = ""
    line: int | None = None
    signature: dict[str, str] = {}
    constexprs: dict[str, ConstexprValue] = {}
    options: dict[str, bool | int] = {}


class TritonLaunchRecordsReport(Payload):
    """The ``triton_launch_records`` monitor (:mod:`workstation.harness.aot_capture`):
    ``launches``, one record per distinct launch in launch order; ``errors``, launches
    whose record could not be made (``"Type: message"``; the launch itself still ran)."""

    errors: list[str] = []
    launches: list[LaunchRecord] = []


# ----------------------------------------------------------------------------- numerics


class NumCallersReport(Payload):
    """The ``num_callers`` monitor (:mod:`workstation.harness.numerics`): Python calls
    into functions of the task file ``file`` (relative to the task folder) while the role
    ran; ``calls``, ``"function:first line"`` -> calls; ``total``, their sum."""

    calls: dict[str, int] = {}
    total: int = 0
    file: str = ""


class KeepFloat64Report(Payload):
    """The ``keep_float64`` monitor (:mod:`workstation.harness.numerics`): aten ops that
    asked for a narrower float dtype and got float64 instead; ``kept``, op name -> times;
    ``total``, their sum."""

    kept: dict[str, int] = {}
    total: int = 0


class PoisonMaskedLoadsReport(Payload):
    """The ``poison_masked_loads`` monitor (:mod:`workstation.harness.numerics`, the lanes
    counted by :func:`workstation.harness.fidelity.poisoned_masked_loads`).

    Attributes:
        active: the poison was installed (only under the Triton interpreter).
        why: why it was not ("" when active).
        poisoned_lanes: masked lanes that read poison (lanes, not loads).
    """

    active: bool = False
    why: str = ""
    poisoned_lanes: int = 0


class PoisonStoresReport(Payload):
    """The ``poison_stores`` monitor (:func:`workstation.harness.interp_ops.poisoned_stores`).

    Attributes:
        active: the poison was installed (only under the Triton interpreter).
        why: why it was not ("" when active).
        stores: store operations that wrote poison.
        elements: elements (lanes) that stores and atomics poisoned.
        atomics: atomic operations poisoned after they ran.
        exempt: lanes stored with their value (``int1`` and pointer stores: no value to spare).
        restored: lanes a kernel read back from the shadow (its own earlier stores).
    """

    active: bool = False
    why: str = ""
    stores: int = 0
    elements: int = 0
    atomics: int = 0
    exempt: int = 0
    restored: int = 0


class ContractRoundReport(Payload):
    """The ``contract_round`` monitor (:mod:`workstation.harness.contract`): the contract
    oracle's dispatch mode.

    Attributes:
        compute: the compute dtype each floating result was rounded to (``"float16"``,
            ``"bfloat16"``, ``"float32"``, ``"float64"``).
        accumulate: the accumulation dtype (``"float32"``, or the compute dtype).
        rounded: aten op name -> results rounded.
        accumulated: op name -> sums and matmuls evaluated with every partial sum rounded.
        kept: op name -> narrower float dtypes asked for and replaced by float64.
    """

    compute: str = ""
    accumulate: str = ""
    rounded: dict[str, int] = {}
    accumulated: dict[str, int] = {}
    kept: dict[str, int] = {}


# ----------------------------------------------------------------------------- Pallas


class PallasKernelCalls(Payload, omit_defaults=True):
    """The invocations of one ``pallas_call`` kernel (by name) during the call.

    Attributes:
        calls: invocations (traced or run).
        failed: those that raised.
        modes: how they ran, each once (``"interpret"``, ``"native"``,
            ``"strict-interpret"``, ``"interpret (the candidate's choice)"``).
        site: the task-code line that built it (None: not in the task's code).
        races: the strict interpreter detected a race in one of them.
        params_set_aside: GPU compiler params set aside for the strict (TPU) interpreter
            (their keys, or their type's name; "" when none, and then not encoded).
    """

    calls: int
    failed: int
    modes: list[str]
    site: Site | None
    races: bool
    params_set_aside: str = ""


class PallasCallsReport(Payload):
    """The ``pallas_calls`` monitor (:mod:`workstation.harness.pallas`).

    Attributes:
        kernels: kernel name -> its invocations.
        calls: invocations in all.
        errors: the first four failures (``"name: Type: message"``, at most 600 characters
            of the message).
        jax: JAX was imported in the child.
        installed: kws's ``pallas_call`` wrapper was installed.
    """

    kernels: dict[str, PallasKernelCalls] = {}
    calls: int = 0
    errors: list[str] = []
    jax: bool = False
    installed: bool = False


class PallasStrictSettings(Payload):
    """The strict interpreter's settings (``pltpu.InterpretParams``): ``cores`` simulated
    cores, ``out_of_bounds_reads`` (``"raise"``), ``uninitialized_memory`` (``"nan"``),
    ``detect_races``."""

    cores: int
    out_of_bounds_reads: str
    uninitialized_memory: str
    detect_races: bool


class PallasStrictReport(Payload):
    """The ``pallas_strict`` monitor (:mod:`workstation.harness.pallas`): ``strict``, the
    settings (None: the monitor did not start); the rest as :class:`PallasCallsReport`,
    for the invocations run strictly."""

    strict: PallasStrictSettings | None = None
    kernels: dict[str, PallasKernelCalls] = {}
    calls: int = 0
    errors: list[str] = []
    jax: bool = False
    installed: bool = False


# ----------------------------------------------------------------------------- all of them


class MonitorReports(Payload, omit_defaults=True):
    """What each monitor of a call observed, one field per monitor kind, named by the
    monitor's tag (:func:`workstation.protocol.steps.kind_of`); None (and not encoded) for a
    monitor the step did not ask for, and for every monitor of a call that raised."""

    aten_ops: AtenOpsReport | None = None
    triton_launches: TritonLaunchesReport | None = None
    triton_launch_records: TritonLaunchRecordsReport | None = None
    num_callers: NumCallersReport | None = None
    keep_float64: KeepFloat64Report | None = None
    poison_masked_loads: PoisonMaskedLoadsReport | None = None
    poison_stores: PoisonStoresReport | None = None
    contract_round: ContractRoundReport | None = None
    pallas_calls: PallasCallsReport | None = None
    pallas_strict: PallasStrictReport | None = None

    def of(self, kind: type[R]) -> R:
        """The report whose Struct is ``kind`` (``reports.of(AtenOpsReport)``), for a reader
        whose step asked for that monitor and returned.

        Raises:
            LookupError: there is none (the step did not ask for the monitor, or its call
                raised): a kws bug in the reader.
        """
        tag = next((t for t, cls in REPORTS.items() if cls is kind), None)
        got = getattr(self, tag) if tag is not None else None
        if not isinstance(got, kind):
            raise LookupError(f"no {tag or kind.__qualname__} monitor report in this call's result")
        return got


#: monitor tag -> its report Struct (the fields of :class:`MonitorReports`).
REPORTS: dict[str, type[Payload]] = {
    "aten_ops": AtenOpsReport, "triton_launches": TritonLaunchesReport,
    "triton_launch_records": TritonLaunchRecordsReport, "num_callers": NumCallersReport,
    "keep_float64": KeepFloat64Report, "poison_masked_loads": PoisonMaskedLoadsReport,
    "poison_stores": PoisonStoresReport,
    "contract_round": ContractRoundReport, "pallas_calls": PallasCallsReport, "pallas_strict": PallasStrictReport,
}
