"""Payloads of the timing and profiling steps: ``timing`` and ``torch_timer``
(:mod:`workstation.harness.timing`), ``author_bench`` (:mod:`workstation.harness.authorbench`)
and ``profile`` (:mod:`workstation.harness.profile`).

Times are integers of nanoseconds where the field's name ends in ``_ns``, floats of
milliseconds in ``_ms``, floats of seconds in ``_s`` and ``seconds``. A key the harness sends
only sometimes and that checks show in evidence or the report as it is defaults to
:data:`msgspec.UNSET` (left out of :func:`msgspec.to_builtins`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.calls import InputDesc
from workstation.protocol.extras.monitors import TritonLaunchesReport
from workstation.protocol.results import Payload, Raised

# ----------------------------------------------------------------------------- shared


class Workload(Payload):
    """Bytes and flops one call of a case must move/do (:func:`workstation.harness.timing.workload`).

    Attributes:
        read_bytes: bytes of the tensor inputs (distinct storages).
        write_bytes: bytes of the outputs.
        flops: ``FlopCounterMode``'s count over the reference on meta tensors (matmul, conv,
            attention; elementwise ops count 0); None when the reference does not run on meta.
        flops_error: why not, ``"<type>: <message>"`` (left out when counted).
    """

    read_bytes: int = 0
    write_bytes: int = 0
    flops: int | None = None
    flops_error: str | UnsetType = UNSET


class Priority(Payload):
    """The job process's niceness before and after kws undid the fork server's ``nice``."""

    nice_before: int = 0
    nice: int = 0


# ----------------------------------------------------------------------------- timing


class CacheInfo(Payload):
    """The cache a flush evicts: its size (``bytes``), ``level`` (2 for a GPU's L2; None when
    unknown) and where the figure came from (``source``: a sysfs path, torch's device
    properties, ``KWS_LLC_BYTES``, or the 64 MiB fallback)."""

    bytes: int = 0
    level: int | None = None
    source: str = ""


class Bandwidth(Payload):
    """Measured copy bandwidth: ``bytes_per_s`` (read + write counted), the bytes of one
    copy (``copy_bytes``) and the best copy's time (``best_ns``)."""

    bytes_per_s: float = 0.0
    copy_bytes: int = 0
    best_ns: int = 0


class SideSamples(Payload):
    """One timed side on one case.

    Attributes:
        role: the entry point timed.
        compile: it ran under ``torch.compile``.
        first_call_ns: the first call, cache flushed (None when it raised).
        interpreter_launches: Triton launches of the first call under the interpreter
            (None when the first call raised).
        stopped: why the side was not sampled further ("" when it was).
        second_call_ns: a second call, timed when the first exceeded ``max_call_s`` (None:
            not timed).
        warmup_calls: untimed warm-up calls (None when the side never got there).
        cold_ns, warm_ns: the samples of the cold (flushed) and warm phases.
        descheduled: CPU samples during which the process was descheduled (count).
        stdrel_cold, stdrel_warm: sample stdev / mean of each phase (None under two samples;
            infinity for a zero mean).
    """

    role: str = ""
    compile: bool = False
    first_call_ns: int | None = None
    interpreter_launches: int | None = None
    stopped: str = ""
    second_call_ns: int | None = None
    warmup_calls: int | None = None
    cold_ns: list[int] = []
    warm_ns: list[int] = []
    descheduled: int = 0
    stdrel_cold: float | None = None
    stdrel_warm: float | None = None


class PhaseStop(Payload):
    """How one sampling phase ended: interleaved ``rounds``, the ``stop`` rule that ended it
    (``stdrel``, ``time_cap_s``, ``max_samples``, ``hard_cap_s``, ``no side to time``) and
    its wall ``seconds``."""

    rounds: int = 0
    stop: str = ""
    seconds: float = 0.0


class TimedCase(Payload):
    """The timing protocol on one case (:func:`workstation.harness.timing.time_case`).

    Attributes:
        case: the case.
        params: the protocol's parameters in force (``target_stdrel``, ``min_samples``,
            ``max_samples``, ``time_cap_s``, ``hard_cap_s``, ``warm_per_round``,
            ``warm_round_s``, ``warm_time_cap_s``, ``warmup_s``, ``warmup_min_calls``,
            ``max_call_s``: the device's defaults with the step's overrides).
        sides: side name -> its samples.
        errors: side name -> what it raised (its setup, a call, the torch.compile time box).
        workload: the case's bytes and flops (None when not asked or no output).
        warm_per_round: back-to-back warm calls per round and side.
        phases: ``cold`` and ``warm`` -> how the phase ended.
        rounds, stop: the cold phase's rounds and stop rule.
        sampling_s: wall seconds of both phases.
    """

    case: dict[str, int | float | str | bool] = {}
    params: dict[str, int | float] = {}
    sides: dict[str, SideSamples] = {}
    errors: dict[str, Raised] = {}
    workload: Workload | None = None
    warm_per_round: int = 0
    phases: dict[str, PhaseStop] = {}
    rounds: int = 0
    stop: str = ""
    sampling_s: float = 0.0


@extra_type
class TimingExtra(Extra, tag="timing"):
    """A ``timing`` step.

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        device_name: the device's name.
        interpreter: Triton ran under the interpreter.
        cache: the cache a flush evicts.
        flush_bytes: bytes a flush writes (2 x the cache).
        clock: ``"CpuClock"`` or ``"CudaClock"``.
        torch_threads: ``torch.get_num_threads()``.
        cpu_model: ``/proc/cpuinfo``'s model name ("" when unreadable).
        allocator: glibc ``mallopt`` parameter -> the value set (None: refused; empty off
            glibc and on a GPU).
        priority: the niceness.
        bandwidth: the copy bandwidth (None when not asked).
        cases: one per case of the step.
    """

    device: str = ""
    device_name: str = ""
    interpreter: bool = False
    cache: CacheInfo = msgspec.field(default_factory=CacheInfo)
    flush_bytes: int = 0
    clock: str = ""
    torch_threads: int = 0
    cpu_model: str = ""
    allocator: dict[str, int | None] = {}
    priority: Priority = msgspec.field(default_factory=Priority)
    bandwidth: Bandwidth | None = None
    cases: list[TimedCase] = []


@extra_type
class TorchTimerExtra(Extra, tag="torch_timer"):
    """A ``torch_timer`` step (``torch.utils.benchmark.Timer.blocked_autorange``): the
    ``median_ms``, ``mean_ms`` and ``iqr_ms`` per call, calls per block (``number_per_run``),
    ``blocks`` measured and each block's per-call time (``times_ms``)."""

    median_ms: float = 0.0
    mean_ms: float = 0.0
    iqr_ms: float = 0.0
    number_per_run: int = 0
    blocks: int = 0
    times_ms: list[float] = []


# ----------------------------------------------------------------------------- author_bench


class BenchArg(Payload):
    """One argument of a traced side call: a tensor's ``shape``, ``dtype``, ``stride``
    (elements), ``device`` and ``contiguous``; a scalar's ``value`` (None, bool, int, float,
    str); anything else's ``type`` name. The keys that do not apply are left out."""

    shape: list[int] | UnsetType = UNSET
    dtype: str | UnsetType = UNSET
    stride: list[int] | UnsetType = UNSET
    device: str | UnsetType = UNSET
    contiguous: bool | UnsetType = UNSET
    value: None | bool | int | float | str | UnsetType = UNSET
    type: str | UnsetType = UNSET


class SideCall(Payload, tag="call", tag_field="kind"):
    """A call of the candidate's or the baseline's entry function from the author's bench.

    Attributes:
        side: ``candidate`` or ``baseline``.
        t, t_end: ``time.perf_counter_ns`` at the call and at its return (None: it did not
            return while traced).
        line: the calling line.
        args: the arguments (None after the first 4 calls of the side).
    """

    side: Literal["candidate", "baseline"] = "candidate"
    t: int = 0
    t_end: int | None = None
    line: int = 0
    args: list[BenchArg] | None = None


class SyncCall(Payload, tag="sync", tag_field="kind"):
    """A ``torch.cuda.synchronize`` call: ``t``, ``t_end`` (ns; None: no return seen), the
    calling ``line``."""

    t: int = 0
    t_end: int | None = None
    line: int = 0


class DoBenchCall(Payload, tag="do_bench", tag_field="kind"):
    """A ``triton.testing.do_bench`` call: ``t``, ``t_end`` (ns; None: no return seen), the
    calling ``line``."""

    t: int = 0
    t_end: int | None = None
    line: int = 0


class ClockRead(Payload, tag="clock", tag_field="kind"):
    """A host clock read: the function (``clock``: ``perf_counter``, ``time``,
    ``default_timer`` ...), ``t`` (ns), its ``line`` and whether it was read in the bench
    file (``in_bench``)."""

    clock: str = ""
    t: int = 0
    line: int = 0
    in_bench: bool = False


class BenchCCall(Payload, tag="c_call", tag_field="kind"):
    """A C function the bench file itself called (``Tensor.clone``, ``torch.randn``):
    ``name`` (its qualified name), ``t`` (ns), ``line``."""

    name: str = ""
    t: int = 0
    line: int = 0


#: one event of the author's bench trace, in order.
BenchEvent = SideCall | SyncCall | DoBenchCall | ClockRead | BenchCCall


@extra_type
class AuthorBenchExtra(Extra, tag="author_bench"):
    """An ``author_bench`` step (the author's ``run(case, device)``).

    Attributes:
        allocator: as :attr:`TimingExtra.allocator`.
        priority: the niceness.
        case: the case run.
        targets: ``<file>:<function>`` -> the side it is (``candidate``/``baseline``).
        bench_file: the bench file's name.
        device_name: the device's name.
        seconds: wall seconds of ``run`` (0 when it raised).
        events: the trace (empty untraced), at most 20000 events.
        dropped_events: events beyond that.
        result: what ``run`` returned: key -> a number as float, anything else's repr (at
            most 200 characters); for a non-dict, ``_type`` and ``_repr``.
    """

    allocator: dict[str, int | None] = {}
    priority: Priority = msgspec.field(default_factory=Priority)
    case: dict[str, int | float | str | bool] = {}
    targets: dict[str, str] = {}
    bench_file: str = ""
    device_name: str = ""
    seconds: float = 0.0
    events: list[BenchEvent] = []
    dropped_events: int = 0
    result: dict[str, float | str] = {}


# ----------------------------------------------------------------------------- profile


class ProfileTrace(Payload):
    """The parts of the exported Chrome trace the parent reads.

    Attributes:
        events (``traceEvents`` in JSON): complete events (``ph`` ``X``) of the kept
            categories, device events first; each ``{"ph", "cat", "name", "ts", "dur",
            "pid", "tid", "args"}`` (``ts``/``dur`` in microseconds, ``args`` cut to ids and
            byte counts). Chrome trace events are open-ended data (torch.profiler's own
            format, read by :mod:`workstation.profiles.torchtrace`): plain dicts.
        device_properties (``deviceProperties``): torch.profiler's device records, open-ended
            as well.
    """

    events: list[dict[str, Any]] = msgspec.field(default_factory=list, name="traceEvents")
    device_properties: list[dict[str, Any]] = msgspec.field(default_factory=list, name="deviceProperties")

    def chrome(self) -> dict[str, Any]:
        """The trace as a Chrome trace document (``traceEvents``, ``deviceProperties``)."""
        return {"traceEvents": self.events, "deviceProperties": self.device_properties}


@extra_type
class ProfileExtra(Extra, tag="profile"):
    """A ``profile`` step.

    Attributes:
        device_name: the device's name.
        interpreter: Triton ran under the interpreter (its kernels are not profiler events).
        calls: calls profiled.
        inputs: the inputs (before the calls).
        warmup_launches, launches: Triton launches of the warm-up and of the profiled calls.
        profiler_error: why torch.profiler could not run or export ("" when it did).
        trace: the trace (None when the profiler did not run).
        trace_events: events of the kept categories in the exported trace (count).
        truncated: more than the step's ``max_events`` of them (the rest dropped).
        workload: the case's bytes and flops (None when not asked).
    """

    device_name: str = ""
    interpreter: bool = False
    calls: int = 1
    inputs: list[InputDesc] = []
    warmup_launches: TritonLaunchesReport = msgspec.field(default_factory=TritonLaunchesReport)
    launches: TritonLaunchesReport = msgspec.field(default_factory=TritonLaunchesReport)
    profiler_error: str = ""
    trace: ProfileTrace | None = None
    trace_events: int = 0
    truncated: bool = False
    workload: Workload | None = None
