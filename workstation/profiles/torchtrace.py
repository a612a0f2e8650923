"""torch.profiler's Chrome-trace JSON (``prof.export_chrome_trace``) as a :class:`Profile`.

What is read (Kineto's trace, as torch 2.x writes it; times are microseconds in the file):

- ``traceEvents`` with ``ph == "X"``: ``cat == "kernel"`` (a GPU kernel: ``name``,
  ``ts``, ``dur``, ``args["External id"]``), ``"gpu_memcpy"`` / ``"gpu_memset"`` (copies
  and fills, ``args["bytes"]`` when present), ``"cpu_op"`` (aten ops on the host: those
  not nested in another ``cpu_op`` of the same thread are the call's framework ops),
  ``"cuda_runtime"`` / ``"cuda_driver"`` launch calls (``cudaLaunchKernel``,
  ``cuLaunchKernel``, ``cuLaunchKernelEx``, ...: launches), ``"user_annotation"`` spans
  named ``ProfilerStep#N`` or ``kws#call`` (one call each: the call count and wall time),
  and ``kws#launch:<kernel>`` (kws's own profile: one Triton launch; host ops inside it
  are the Triton interpreter's and are dropped);
- ``deviceProperties[0]["name"]``: the GPU.

A kernel's ``launched_by`` is the outermost ``cpu_op`` around the op whose
``External id`` it carries (``aten::mm`` for a cuBLAS GEMM); a Triton or extension launch
made from Python has none. The time a GPU was busy is the union of the kernel, copy and
fill intervals. Events of the wrong shape are skipped and counted in ``notes``; a trace of
the CPU alone (no device events) is a CPU profile whose framework ops carry host times.

Holistic Trace Analysis (``holistictraceanalysis``) reads the same traces, but it depends
on JupyterLab, plotly, pandas and pytest at run time; the fields kws needs are these few,
so they are read here (docs/profiles.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workstation.profiles.model import Profile, aggregate, finite_number, interval_union, table

#: the most events read from one trace (a trace of a few calls has thousands).
MAX_EVENTS = 2_000_000
#: launch API names counted as kernel launches.
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
                "cuLaunchKernelEx", "cudaGraphLaunch", "hipLaunchKernel", "hipModuleLaunchKernel",
                "hipExtModuleLaunchKernel")
#: annotation names that mark one call.
CALL_MARKERS = ("ProfilerStep#", "kws#call")
#: the annotation kws's profile step puts around each Triton launch.
LAUNCH_MARKER = "kws#launch:"
_DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
#: a host op: (thread, start, end, name, External id); times in microseconds, as in the file.
Op = tuple[Any, float, float, str, Any]


def _key(x: Any) -> int | str | None:
    """An id field as a hashable value (a file may hold anything there)."""
    return x if isinstance(x, int | str) and not isinstance(x, bool) else None


def parse_chrome_trace(doc: Any, *, source: str, role: str, calls: int = 0, device: str = "") -> Profile:
    """The profile of a parsed Chrome trace (module doc).

    Args:
        doc: the parsed JSON: an object with ``traceEvents`` (and optionally
            ``deviceProperties``), or a bare event list.
        source, role: recorded on the profile.
        calls: calls the trace covers (0: one per call marker, else 1).
        device: the device name when the trace does not record one.

    Raises:
        ValueError: ``doc`` is neither an object with a ``traceEvents`` list nor a list.
    """
    if isinstance(doc, Mapping):
        events = doc.get("traceEvents")
        props = doc.get("deviceProperties")
    else:
        events, props = doc, None
    if not isinstance(events, list):
        raise ValueError("no traceEvents list (not a Chrome trace)")
    notes: list[str] = []
    if len(events) > MAX_EVENTS:
        notes.append(f"only the first {MAX_EVENTS} of {len(events)} events were read")
        events = events[:MAX_EVENTS]
    tr = _read_events(events)
    if tr.bad:
        notes.append(f"{tr.bad} event(s) without a name, a time or a duration were skipped")
    ops = tr.ops
    if tr.launch_spans:
        ops = [op for op in ops if not _inside(op, tr.launch_spans.get(op[0], ()))]
    top_ops, outer_of = _outermost(ops)
    rows = []
    spans = []
    for name, kind, ts, dur, args in tr.device_rows:
        nbytes = finite_number(args.get("bytes")) if kind != "kernel" else None
        ext = _key(args.get("External id"))
        by = outer_of.get(ext, "") if kind == "kernel" and ext is not None else ""
        rows.append((name, kind, dur * 1e3, nbytes, None, by))
        spans.append((ts, ts + dur))
    kernels = aggregate(rows)
    op_stats = aggregate((name, "op", (end - ts) * 1e3, None, None, "") for _, ts, end, name, _ in top_ops)
    dev_name = ""
    if isinstance(props, list) and props and isinstance(props[0], Mapping) and isinstance(props[0].get("name"), str):
        dev_name = props[0]["name"][:200]
    dev_name = dev_name or device
    n_kernels = sum(1 for r in tr.device_rows if r[1] == "kernel")
    kind = "cuda" if tr.device_rows or dev_name else "cpu"
    n_calls = calls or len(tr.markers) or 1
    return Profile(
        source=source, format="torch-trace", role=role, device=dev_name, device_kind=kind, calls=max(1, n_calls),
        kernels=kernels, ops=op_stats,
        launches=(tr.launches or n_kernels) if kind == "cuda" else None,
        busy_ns=interval_union(spans) * 1e3 if spans else (0.0 if kind == "cuda" else None),
        wall_ns=sum(tr.markers) * 1e3 if tr.markers else None, notes=tuple(notes))


@dataclass
class _Trace:
    """What the complete events of a trace hold (module doc), times in microseconds:
    ``device_rows`` (name, kind, start, duration, args) of kernels, copies and fills;
    ``ops`` the host ops; ``launches`` the launch API calls; ``markers`` the call spans'
    durations; ``launch_spans`` per thread, kws's launch annotations; ``bad`` the events
    skipped for a missing name, time or duration."""

    device_rows: list[tuple[str, str, float, float, Mapping[str, Any]]] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    launches: int = 0
    markers: list[float] = field(default_factory=list)
    launch_spans: dict[Any, list[tuple[float, float]]] = field(default_factory=dict)
    bad: int = 0


def _read_events(events: list[Any]) -> _Trace:
    """Sort the complete (``ph == "X"``) events of ``events`` into a :class:`_Trace`."""
    tr = _Trace()
    for e in events:
        if not isinstance(e, Mapping) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), e.get("name")
        ts, dur = finite_number(e.get("ts")), finite_number(e.get("dur"))
        if not isinstance(name, str) or ts is None or dur is None or dur < 0:
            tr.bad += 1
            continue
        args = table(e.get("args"))
        thread = (_key(e.get("pid")), _key(e.get("tid")))
        if cat in _DEVICE_CATS:
            tr.device_rows.append((name, _DEVICE_CATS[cat], ts, dur, args))
        elif cat == "cpu_op":
            tr.ops.append((thread, ts, ts + dur, name, _key(args.get("External id"))))
        elif cat in ("cuda_runtime", "cuda_driver") and name in LAUNCH_NAMES:
            tr.launches += 1
        elif cat == "user_annotation" and name.startswith(CALL_MARKERS):
            tr.markers.append(dur)
        elif cat == "user_annotation" and name.startswith(LAUNCH_MARKER):
            tr.launch_spans.setdefault(thread, []).append((ts, ts + dur))
    return tr


def _inside(op: Op, spans: Any) -> bool:
    return any(s <= op[1] and op[2] <= e for s, e in spans)


def _outermost(ops: list[Op]) -> tuple[list[Op], dict[Any, str]]:
    """The ops not nested in another op of their thread, and External id -> the name of
    the outermost op around the op that carries it."""
    by_thread: dict[Any, list[Op]] = {}
    for op in ops:
        by_thread.setdefault(op[0], []).append(op)
    top: list[Op] = []
    outer_of: dict[Any, str] = {}
    for seq in by_thread.values():
        seq.sort(key=lambda o: (o[1], -o[2]))
        cur = None
        for op in seq:
            if cur is None or op[1] >= cur[2]:
                cur = op
                top.append(op)
            if op[4] is not None:
                outer_of.setdefault(op[4], cur[3])
    return top, outer_of
