"""Child-side kws timing protocol: one implementation for the CPU and CUDA.

The ``timing`` step measures several *sides* (the candidate, the baseline, the reference,
a ``torch.compile`` of the baseline) on one or more cases, interleaved, and sends every
sample back; the parent (:mod:`workstation.analysis.timingstats`) computes medians, IQRs and the
bootstrap interval of the speedup. The protocol (documented in ``docs/timing.md``):

1. Inputs: each side gets its own inputs from ``make_inputs(case, device, seed)`` (equal
   values, separate buffers, so an in-place side cannot disturb another); declared
   ``inout_args`` are restored from a pristine copy before every call, outside the timed
   region.
2. First call: the cache is flushed, then the side's first call is timed on its own
   (``first_call_ms``: it includes compilation, autotuning, lazy initialisation). A
   ``torch.compile`` side compiles here, inside a time box (``compile_timeout_s``).
3. Warm-up: further untimed calls until ``warmup_s`` has passed (at least
   ``warmup_min_calls``); none of them is a sample.
4. Two phases, each in rounds with the sides interleaved (A B A B ...; drift hits every
   side alike). *Cold* phase: per round and side, the cache is flushed, then one call is
   timed. *Warm* phase (after a few untimed calls per side; no flush anywhere in it, so
   the samples are the steady state a back-to-back loop sees, as
   ``torch.utils.benchmark.Timer`` measures): per round and side, the same number of
   back-to-back timed calls for every side, enough calls of the slowest side (from its
   warm-up) to fill ``warm_round_s``, at least ``warm_per_round``, at most 100.
5. Stop, per phase (nvbench's ``stdrel`` criterion): once every side has
   ``min_samples`` rounds and the relative noise of its samples of that phase (sample
   stdev / mean) is below ``target_stdrel``; or when the phase's time cap
   (``time_cap_s`` cold, ``warm_time_cap_s`` warm) has passed (after ``min_samples``
   rounds); or at ``max_samples``; or, whatever the count, at ``hard_cap_s``.

Clocks and cache flush:

- CUDA: ``torch.cuda.Event(enable_timing=True)`` pairs recorded on the current stream
  (the stream the callable launches on), then ``torch.cuda.synchronize()`` (device-wide,
  so work on any stream has finished before the next sample); the flush zeroes an int32
  buffer of ``2 * L2_cache_size`` bytes (``torch.cuda.get_device_properties``) on the
  same stream, before the start event, as ``triton.testing.do_bench`` does.
- CPU: ``time.perf_counter_ns`` around the call (torch CPU ops are synchronous); the flush
  fills an int64 buffer of ``2 *`` the last-level cache size, read from
  ``/sys/devices/system/cpu/cpu0/cache/index*/size`` (the highest-level data/unified
  cache; ``spec.cache_bytes`` overrides it (the parent passes ``KWS_LLC_BYTES``),
  64 MiB when neither is available).

On the CPU the step first makes freed heap memory stay in the process
(:func:`steady_allocator`), so calls do not page-fault their temporaries back in; on
every device it undoes the fork server's ``nice`` where permitted
(:func:`timing_priority`).

Under the Triton interpreter a side whose calls launch Triton kernels is timed as
Python/numpy emulation: :func:`count_interpreter_launches` counts the launches of its
first call and the step reports ``interpreter_launches``; with
``stop_if_interpreted`` the side is not sampled further (the parent reports the timing
as not representative).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from workstation.harness import StepOutput, step
from workstation.harness.core import INTERPRETER, JobContext, error_info
from workstation.harness.launches import Launch, LaunchObserver, observing
from workstation.protocol.extras.timing import (
    Bandwidth,
    CacheInfo,
    PhaseStop,
    Priority,
    SideSamples,
    TimedCase,
    TimingExtra,
    TorchTimerExtra,
    Workload,
)
from workstation.protocol.results import Raised
from workstation.protocol.steps import Case, TimingSide, TimingStep, TorchTimerStep

FALLBACK_LLC_BYTES = 64 * 2 ** 20
_SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

#: defaults per device kind: (target_stdrel, min_samples, time_cap_s, hard_cap_s)
DEFAULTS = {
    "cpu": {"target_stdrel": 0.02, "min_samples": 10, "max_samples": 500, "time_cap_s": 3.0,
            "hard_cap_s": 12.0, "warm_per_round": 3, "warm_round_s": 0.005, "warm_time_cap_s": 1.0,
            "warmup_s": 0.05, "warmup_min_calls": 2,
            "max_call_s": 0.5},
    "cuda": {"target_stdrel": 0.005, "min_samples": 25, "max_samples": 500, "time_cap_s": 2.0,
             "hard_cap_s": 10.0, "warm_per_round": 3, "warm_round_s": 0.002, "warm_time_cap_s": 1.0,
             "warmup_s": 0.1, "warmup_min_calls": 3,
             "max_call_s": 0.5},
}


# ----------------------------------------------------------------------------- caches


def _parse_size(text: str) -> int:
    """``"2048K"`` / ``"32M"`` / ``"1G"`` / ``"512"`` -> bytes (sysfs cache sizes, base 1024)."""
    t = text.strip().upper()
    mult = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(t[-1:], 1)
    return int(t[:-1] if mult > 1 else t) * mult


def cpu_llc() -> CacheInfo:
    """The CPU's last-level cache: its ``bytes``, ``level`` and ``source``.

    The highest-level data or unified cache listed under
    ``/sys/devices/system/cpu/cpu0/cache/index*`` (``level``, ``type``, ``size``); 64 MiB
    when sysfs has no cache entries.
    """
    best: tuple[int, int] | None = None
    for d in sorted(_SYS_CACHE.glob("index*")):
        try:
            kind = (d / "type").read_text().strip()
            level = int((d / "level").read_text())
            size = _parse_size((d / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and (best is None or (level, size) > best):
            best = (level, size)
    if best is None:
        return CacheInfo(bytes=FALLBACK_LLC_BYTES, level=None, source="fallback (no sysfs cache entries)")
    return CacheInfo(bytes=best[1], level=best[0], source=str(_SYS_CACHE / "index*"))


def device_cache(device: torch.device, override: int | None = None) -> CacheInfo:
    """The cache a flush must evict: the GPU's L2 or the CPU's last-level cache
    (``override`` bytes instead, when given: ``KWS_LLC_BYTES`` in the parent)."""
    if override:
        return CacheInfo(bytes=int(override), level=None, source="KWS_LLC_BYTES")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return CacheInfo(bytes=int(props.L2_cache_size), level=2,
                         source="torch.cuda.get_device_properties().L2_cache_size")
    return cpu_llc()


class CacheFlusher:
    """Evicts the device cache by writing a buffer of ``2 x`` its size.

    ``flush()`` zeroes (CUDA, on the current stream) or fills with a changing value
    (CPU) the whole buffer; on CUDA the work is queued before the next start event.
    """

    def __init__(self, device: torch.device, cache_bytes: int):
        self.device = device
        self.nbytes = 2 * int(cache_bytes)
        dtype = torch.int32 if device.type == "cuda" else torch.int64
        n = max(1, self.nbytes // (4 if device.type == "cuda" else 8))
        self.buf = torch.empty(n, dtype=dtype, device=device)
        self._k = 0

    def flush(self) -> None:
        if self.device.type == "cuda":
            self.buf.zero_()
        else:
            self._k += 1
            self.buf.fill_(self._k)


# ----------------------------------------------------------------------------- clocks


class CpuClock:
    """``time.perf_counter_ns`` around a synchronous call.

    Also reads the process CPU time (``time.process_time_ns``) just outside the timed
    region: ``last_cpu_ns`` is the CPU time the process used during the last sample, so
    a sample whose wall time much exceeds it was descheduled (another process ran).
    """

    kind = "cpu"

    def __init__(self) -> None:
        self.last_cpu_ns = 0

    def measure(self, fn: Callable[[], Any], before: Callable[[], None] | None = None) -> int:
        """Run ``before`` (untimed), then time ``fn``; returns nanoseconds."""
        if before is not None:
            before()
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        self.last_cpu_ns = time.process_time_ns() - c0
        return t1 - t0


class CudaClock:
    """CUDA events on the current stream, then a device-wide synchronize."""

    kind = "cuda"

    def __init__(self, device: torch.device):
        self.device = device
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    last_cpu_ns = 0

    def measure(self, fn: Callable[[], Any], before: Callable[[], None] | None = None) -> int:
        """Queue ``before`` (the flush), record the start event, call ``fn``, record the
        end event on the current stream, synchronize the device; returns nanoseconds
        (``Event.elapsed_time`` is in ms, about 0.5 us resolution)."""
        stream = torch.cuda.current_stream(self.device)
        if before is not None:
            before()
        self.start.record(stream)
        fn()
        self.end.record(stream)
        torch.cuda.synchronize(self.device)
        return int(round(self.start.elapsed_time(self.end) * 1e6))


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (``""`` when unreadable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def make_clock(device: torch.device) -> CpuClock | CudaClock:
    return CudaClock(device) if device.type == "cuda" else CpuClock()


# ----------------------------------------------------------------------------- helpers


class LaunchTally(LaunchObserver):
    """Counts the kernel launches that run (warm-up launches only compile), whether they
    return or raise."""

    def __init__(self) -> None:
        self.launches = 0

    def before(self, launch: Launch) -> None:
        if not launch.warmup:
            self.launches += 1


@contextlib.contextmanager
def count_interpreter_launches() -> Iterator[LaunchTally]:
    """Count the Triton kernel launches the interpreter runs inside the block (through
    :mod:`workstation.harness.launches`); zero outside the interpreter."""
    tally = LaunchTally()
    if not INTERPRETER:
        yield tally
        return
    with observing(tally):
        yield tally


class _CompileTimeout(BaseException):  # BaseException: torch must not swallow it
    """Raised by SIGALRM when a torch.compile first call runs past its time box."""


@contextlib.contextmanager
def time_box(seconds: float) -> Iterator[None]:
    """Raise :class:`_CompileTimeout` in the main thread after ``seconds`` (SIGALRM)."""

    def handler(signum: int, frame: Any) -> None:
        raise _CompileTimeout(f"did not finish within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def steady_allocator() -> dict[str, int | None]:
    """CPU only: keep freed heap memory in the process (glibc ``mallopt``).

    PyTorch's CPU allocator is the C library's. With glibc's defaults, a freed temporary
    of a few MiB is returned to the kernel (``M_TRIM_THRESHOLD``, or ``munmap`` above the
    dynamic ``M_MMAP_THRESHOLD``) and the next call page-faults it back in, zero-filled:
    the timings then measure page faults, at a rate that depends on the allocation
    history, not the kernel. Setting ``M_MMAP_THRESHOLD`` to its largest value (32 MiB on
    64-bit) and ``M_TRIM_THRESHOLD`` to 1 GiB makes freed memory be reused, as the CUDA
    caching allocator does on the GPU. Returns what was set (empty off glibc)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return {}
    try:
        libc = ctypes.CDLL(name)
        ok_mmap = libc.mallopt(M_MMAP_THRESHOLD, 32 * 2 ** 20)
        ok_trim = libc.mallopt(M_TRIM_THRESHOLD, 2 ** 30)
    except (OSError, AttributeError):
        return {}
    return {"M_MMAP_THRESHOLD": 32 * 2 ** 20 if ok_mmap else None, "M_TRIM_THRESHOLD": 2 ** 30 if ok_trim else None}


def timing_priority() -> Priority:
    """Undo the fork server's ``nice`` for a timing child (timing jobs run alone, so
    they slow no other check; at a lower priority than the machine's other processes a
    timed call is descheduled more often). Needs permission to lower the niceness
    (``CAP_SYS_NICE`` or ``RLIMIT_NICE``); without it the niceness stays. Returns
    the niceness before and after."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if before > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError:
            pass
    return Priority(nice_before=before, nice=os.getpriority(os.PRIO_PROCESS, 0))


def _prepare_compile_env(ctx: JobContext) -> None:
    """Inductor: compile in-process, cache next to Triton's kws cache (reused by later runs)."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    tcache = os.environ.get("TRITON_CACHE_DIR")
    if tcache and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tcache).parent / "inductor")


def _nbytes_unique(tensors: list[Any]) -> int:
    """Bytes of the distinct storages among ``tensors`` (each counted once)."""
    seen: set[tuple[int, str]] = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        key = (t.untyped_storage().data_ptr(), str(t.device))
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def workload(ctx: JobContext, inputs: tuple, outputs: list[Any]) -> Workload:
    """Bytes and flops one call of the case must move/do, for the roofline.

    ``read_bytes``: tensor inputs (distinct storages); ``write_bytes``: the outputs;
    ``flops``: ``torch.utils.flop_counter.FlopCounterMode`` over the *reference* run on
    meta copies of the inputs (counts matmul/conv/attention flops; elementwise ops count
    0, so memory-bound ops are bounded by bytes alone); ``None`` when the reference does
    not run on meta tensors.
    """
    out = Workload(read_bytes=_nbytes_unique(list(inputs)), write_bytes=_nbytes_unique(list(outputs)), flops=None)
    try:
        from torch.utils.flop_counter import FlopCounterMode

        meta = tuple(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs)
        ref = ctx.callable("reference")
        with FlopCounterMode(display=False) as fc:
            ref(*meta)
        out.flops = int(fc.get_total_flops())
    except Exception as e:  # noqa: BLE001  (flops are optional evidence)
        out.flops_error = f"{type(e).__name__}: {str(e)[:200]}"
    return out


# ----------------------------------------------------------------------------- the step


class _Side:
    """One timed callable with its own inputs and sample lists."""

    def __init__(self, ctx: JobContext, spec: TimingSide, case: Case, seed: int):
        self.name = spec.name
        self.role = spec.role
        self.compile = spec.compile
        self.ctx = ctx
        self.inputs = ctx.make_inputs(case, seed)
        self.inout = sorted(set(ctx.inout_args))
        self.pristine = {i: self.inputs[i].clone() for i in self.inout
                         if isinstance(self.inputs[i], torch.Tensor)}
        fn = ctx.callable(self.role)
        if self.compile:
            _prepare_compile_env(ctx)
            fn = torch.compile(fn)
        self.fn = fn
        self.cold: list[int] = []
        self.warm: list[int] = []
        self.preempted = 0
        self.call_s = 0.0
        self.report = SideSamples(role=self.role, compile=self.compile)
        self.active = True
        self.outputs: list[Any] = []

    def restore(self) -> None:
        for i, x in self.pristine.items():
            self.inputs[i].copy_(x)

    def call(self) -> Any:
        return self.fn(*self.inputs)


def _stdrel(xs: list[int]) -> float:
    """Relative noise of samples: sample stdev / mean (nvbench's stdrel)."""
    if len(xs) < 2:
        return math.inf
    m = statistics.fmean(xs)
    return statistics.stdev(xs) / m if m > 0 else math.inf



def _cold_start(sd: _Side, flusher: CacheFlusher) -> Callable[[], None]:
    """What runs untimed before a cold call of ``sd``: its inputs restored, the caches
    flushed."""
    def before() -> None:
        sd.restore()
        flusher.flush()

    return before

def time_case(ctx: JobContext, case: Case, spec: TimingStep, flusher: CacheFlusher,
              clock: CpuClock | CudaClock) -> TimedCase:
    """Run the protocol (module doc) for one case."""
    p = {**DEFAULTS[ctx.device.type], **spec.params}
    sides: list[_Side] = []
    errors: dict[str, Raised] = {}
    for s in spec.sides:
        try:
            sides.append(_Side(ctx, s, case, spec.seed))
        except BaseException as e:  # noqa: BLE001  (a side that cannot be set up is reported, the others timed)
            errors[s.name] = error_info(e, getattr(e, "_kws_phase", "setup"))
    doc = TimedCase(case=dict(case), params=p, errors=errors)
    # 2. first call, cold, on its own
    for sd in sides:
        _first_call(sd, spec, p, flusher, clock, errors)
    if spec.workload and sides and sides[0].outputs:
        doc.workload = workload(ctx, sides[0].inputs, sides[0].outputs)
    # 3. warm-up, untimed
    active = _warm_up(ctx, [sd for sd in sides if sd.active], p, errors)
    # warm samples per round, the same for every side (so rounds pair up): enough calls
    # of the slowest side to fill warm_round_s, at least warm_per_round, at most 100
    slowest = max((sd.call_s for sd in active), default=0.0)
    n_warm = int(min(100, max(p["warm_per_round"], math.ceil(p["warm_round_s"] / max(slowest, 1e-9)))))
    doc.warm_per_round = n_warm
    _sample(ctx, doc, active, p, errors, flusher, clock, n_warm)
    for sd in sides:
        sd.report.cold_ns, sd.report.warm_ns, sd.report.descheduled = sd.cold, sd.warm, sd.preempted
        sd.report.stdrel_cold = _stdrel(sd.cold) if len(sd.cold) > 1 else None
        sd.report.stdrel_warm = _stdrel(sd.warm) if len(sd.warm) > 1 else None
        doc.sides[sd.name] = sd.report
    return doc


def _first_call(sd: _Side, spec: TimingStep, p: dict[str, Any], flusher: CacheFlusher, clock: CpuClock | CudaClock,
                errors: dict[str, Raised]) -> None:
    """Step 2 of the protocol for one side: its first call, cold and alone (a second one when
    the first was slow: it may have been compiling); a side that fails or is too slow is
    made inactive with the reason."""
    box = time_box(spec.compile_timeout_s) if sd.compile else contextlib.nullcontext()
    try:
        got: list[Any] = []

        def first() -> None:
            got.append(sd.call())

        with count_interpreter_launches() as launches, box:
            t_first = clock.measure(first, before=_cold_start(sd, flusher))
        _keep(sd, got[0])
    except _CompileTimeout as e:
        sd.active = False
        errors[sd.name] = Raised(type="TimeoutError", message=f"torch.compile: {e}", phase="compile", origin="kws")
        return
    except BaseException as e:  # noqa: BLE001  (the side's error is reported, the others timed)
        sd.active = False
        errors[sd.name] = error_info(e, "call")
        return
    sd.report.first_call_ns = t_first
    sd.report.interpreter_launches = launches.launches
    if launches.launches and spec.stop_if_interpreted:
        sd.active = False
        sd.report.stopped = "the call launches Triton kernels under the interpreter"
    elif t_first > p["max_call_s"] * 1e9 and not sd.compile:
        try:
            t_second = clock.measure(sd.call, before=sd.restore)
        except BaseException as e:  # noqa: BLE001  (the side's error is reported, the others timed)
            sd.active = False
            errors[sd.name] = error_info(e, "call")
            return
        sd.report.second_call_ns = t_second
        if t_second > p["max_call_s"] * 1e9:
            sd.active = False
            sd.report.stopped = f"one call takes {t_second / 1e9:.2f} s > max_call_s {p['max_call_s']:g} s"


def _warm_up(ctx: JobContext, active: list[_Side], p: dict[str, Any], errors: dict[str, Raised]) -> list[_Side]:
    """Step 3: untimed calls of each side (at least ``warmup_min_calls``, up to
    ``warmup_s`` seconds and 50 calls); the sides still active after it."""
    for sd in active:
        t0, n = time.perf_counter(), 0
        try:
            while n < p["warmup_min_calls"] or (time.perf_counter() - t0 < p["warmup_s"] and n < 50):
                sd.restore()
                sd.call()
                ctx.sync()
                n += 1
        except BaseException as e:  # noqa: BLE001  (the side's error is reported, the others timed)
            sd.active = False
            errors[sd.name] = error_info(e, "warm-up")
        sd.report.warmup_calls = n
        sd.call_s = (time.perf_counter() - t0) / max(n, 1)
    return [sd for sd in active if sd.active]


def _sample(ctx: JobContext, doc: TimedCase, active: list[_Side], p: dict[str, Any], errors: dict[str, Raised],
            flusher: CacheFlusher, clock: CpuClock | CudaClock, n_warm: int) -> None:
    """Step 4: the cold phase, then the warm phase (no flush anywhere in it, so warm samples
    are the steady state a back-to-back loop sees); each phase interleaves the sides."""

    def cold_round(sd: _Side) -> None:
        sd.cold.append(clock.measure(sd.call, before=_cold_start(sd, flusher)))
        sd.preempted += _descheduled(sd.cold[-1], clock)

    def warm_round(sd: _Side) -> None:
        for _ in range(n_warm):
            sd.warm.append(clock.measure(sd.call, before=sd.restore if sd.pristine else None))
            sd.preempted += _descheduled(sd.warm[-1], clock)

    for phase, one_round, key, cap in (("cold", cold_round, "cold", p["time_cap_s"]),
                                       ("warm", warm_round, "warm", p["warm_time_cap_s"])):
        if phase == "warm":
            for sd in active:  # leave the cold phase's state: a few untimed calls per side
                try:
                    for _ in range(int(p["warmup_min_calls"])):
                        sd.restore()
                        sd.call()
                        ctx.sync()
                except BaseException as e:  # noqa: BLE001  (the side's error is reported, the others timed)
                    sd.active = False
                    errors[sd.name] = error_info(e, "warm-up")
            active = [sd for sd in active if sd.active]
        doc.phases[phase] = _sample_phase(active, one_round, key, cap, p, errors)
        active = [sd for sd in active if sd.active]
    cold = doc.phases["cold"]
    doc.rounds = cold.rounds
    doc.stop = cold.stop
    doc.sampling_s = cold.seconds + doc.phases["warm"].seconds


def _sample_phase(active: list[_Side], one_round: Callable[[_Side], None], key: str, cap: float,
                  p: dict[str, Any], errors: dict[str, Raised]) -> PhaseStop:
    """Interleaved rounds (A B A B ...) of one phase until the stop rule (module doc, 5.)
    holds for the samples in ``key`` (``cold``/``warm``); returns rounds, stop, seconds."""
    t_start = time.perf_counter()
    stop = "no side to time"
    rounds = 0
    while active:
        for sd in active:
            try:
                one_round(sd)
            except BaseException as e:  # noqa: BLE001
                sd.active = False
                errors[sd.name] = error_info(e, "sample")
        rounds += 1
        active = [sd for sd in active if sd.active]
        n = min((len(getattr(sd, key)) for sd in active), default=0)
        elapsed = time.perf_counter() - t_start
        if n >= p["max_samples"]:
            stop = "max_samples"
            break
        if elapsed >= p["hard_cap_s"]:
            stop = "hard_cap_s"
            break
        if rounds >= p["min_samples"]:
            if all(_stdrel(getattr(sd, key)) < p["target_stdrel"] for sd in active):
                stop = "stdrel"
                break
            if elapsed >= cap:
                stop = "time_cap_s"
                break
    return PhaseStop(rounds=rounds, stop=stop, seconds=time.perf_counter() - t_start)


def _descheduled(wall_ns: int, clock: CpuClock | CudaClock) -> int:
    """1 when a CPU sample's wall time exceeds the process's CPU time over it by more than
    10% + 20 us (the process was descheduled: another process ran meanwhile), else 0."""
    if clock.kind != "cpu":
        return 0
    return int(wall_ns > 1.1 * clock.last_cpu_ns + 20_000)


def _keep(sd: _Side, result: Any) -> None:
    """Remember the first call's outputs (for the workload's output bytes)."""
    try:
        sd.outputs = sd.ctx.outputs_of(result, sd.inputs)
    except TypeError:
        sd.outputs = []


def copy_bandwidth(ctx: JobContext, flusher: CacheFlusher, reps: int = 3) -> Bandwidth:
    """Measured memory bandwidth (bytes/s): the best of ``reps`` copies of one half of the
    flush buffer into the other half (read + write counted, ``2 * n`` bytes per copy)."""
    buf = flusher.buf.view(torch.uint8)
    half = buf.numel() // 2
    src, dst = buf[:half], buf[half:2 * half]
    clock = make_clock(ctx.device)
    best = min(clock.measure(lambda: dst.copy_(src)) for _ in range(reps))
    return Bandwidth(bytes_per_s=2 * half / (best / 1e9), copy_bytes=int(half), best_ns=int(best))


@step(TimingStep)
def timing_step(ctx: JobContext, spec: TimingStep) -> StepOutput:
    """Time ``spec.sides`` on every case of ``spec.cases`` (module doc); ``spec.params``
    overrides :data:`DEFAULTS`.

    ``extra``: :class:`~workstation.protocol.extras.timing.TimingExtra`: ``device``,
    ``device_name``, ``interpreter``, ``cache`` (the flushed cache), ``flush_bytes``,
    ``clock``, ``bandwidth`` (CPU copy bandwidth when asked), ``cases`` (per case: per side
    ``first_call_ns``, ``cold_ns``, ``warm_ns``, ``warmup_calls``, ``interpreter_launches``;
    ``rounds``, ``stop``, ``errors``, ``workload``).
    """
    allocator = steady_allocator() if ctx.device.type == "cpu" else {}
    priority = timing_priority()
    cache = device_cache(ctx.device, spec.cache_bytes)
    flusher = CacheFlusher(ctx.device, cache.bytes)
    clock = make_clock(ctx.device)
    extra = TimingExtra(device=ctx.device.type, device_name=ctx.device_name, interpreter=INTERPRETER, cache=cache,
                        flush_bytes=flusher.nbytes, clock=type(clock).__name__, torch_threads=torch.get_num_threads(),
                        cpu_model=cpu_model(), allocator=allocator, priority=priority)
    if spec.bandwidth:
        extra.bandwidth = copy_bandwidth(ctx, flusher)
    for case in spec.cases:
        extra.cases.append(time_case(ctx, case, spec, flusher, clock))
    return StepOutput(ok=True, extra=extra)


@step(TorchTimerStep)
def torch_timer_step(ctx: JobContext, spec: TorchTimerStep) -> StepOutput:
    """``torch.utils.benchmark.Timer(...).blocked_autorange()`` on one role and case, in
    the same child conditions as the ``timing`` step (allocator, threads): the yardstick
    of ``benchmarks/timing_accuracy.py``. ``extra``:
    :class:`~workstation.protocol.extras.timing.TorchTimerExtra`: ``median_ms``,
    ``mean_ms``, ``iqr_ms``, ``number_per_run``, ``blocks``, ``times_ms`` (per-run time of
    each block).
    """
    from torch.utils import benchmark

    if ctx.device.type == "cpu":
        steady_allocator()
    timing_priority()
    inputs = ctx.make_inputs(spec.case, spec.seed)
    fn = ctx.callable(spec.role)
    m = benchmark.Timer(stmt="fn(*inputs)", globals={"fn": fn, "inputs": inputs},
                        num_threads=torch.get_num_threads()).blocked_autorange(
        min_run_time=spec.min_run_time)
    times = [t * 1e3 for t in m.times]
    return StepOutput(ok=True, extra=TorchTimerExtra(median_ms=m.median * 1e3, mean_ms=m.mean * 1e3,
                                                     iqr_ms=m.iqr * 1e3, number_per_run=int(m.number_per_run),
                                                     blocks=len(times), times_ms=times))
