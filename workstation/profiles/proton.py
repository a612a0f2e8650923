"""Triton proton's hatchet JSON (``proton.start(name)`` ... ``proton.finalize()`` writes
``name.hatchet``) as a :class:`Profile`.

The file is a JSON array: ``[tree, devices]``. ``tree`` is a node ``{"frame": {"name",
"type"}, "metrics": {...}, "children": [nodes]}`` (proton's
``TreeData::buildHatchetJson``); a node whose metrics hold ``"time (ns)"`` and
``"device_id"`` is a kernel (``"count"`` invocations), and user metrics attached by a
launch hook or ``proton.scope(metrics=...)`` are summed per kernel: ``bytes``, ``flops``
and ``flops<width>`` (``flops8``, ``flops16``, ``flops32``, ``flops64``). ``devices`` is
``{"CUDA": {"0": {"arch", "num_sms", "clock_rate" (kHz), "memory_clock_rate" (kHz),
"bus_width" (bits)}}}``: kept as ``device_info``; the peak bandwidth proton itself uses
is ``2 * bus_width * memory_clock_rate * 1e3 / 8`` bytes/s (``triton.profiler.specs.max_bps``).

The tree is walked with an explicit stack (a deep file cannot exhaust Python's recursion).
``llnl-hatchet`` reads this format into a pandas GraphFrame (proton's viewer uses it); it
pulls pandas, matplotlib, textX and caliper-reader for what is a walk over one JSON tree,
so kws walks it here (docs/profiles.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workstation.profiles.model import Profile, aggregate, finite_number, table

MAX_NODES = 1_000_000
_FLOP_KEYS = ("flops", "flops8", "flops16", "flops32", "flops64")


def proton_peak_bandwidth(info: Mapping[str, Any]) -> float | None:
    """Bytes/s from proton's device entry (``bus_width`` bits, ``memory_clock_rate`` kHz),
    as ``triton.profiler.specs.max_bps`` computes it for CUDA; ``None`` when absent."""
    bw, clk = finite_number(info.get("bus_width")), finite_number(info.get("memory_clock_rate"))
    return 2 * bw * clk * 1e3 / 8 if bw and clk else None


def parse_proton(doc: Any, *, source: str, role: str, calls: int = 0, device: str = "") -> Profile:
    """The profile of a parsed proton hatchet document (module doc).

    Raises:
        ValueError: not a list whose first element is a node with ``frame``.
    """
    if isinstance(doc, Mapping):
        doc = [doc]
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], Mapping) or "frame" not in doc[0]:
        raise ValueError("not a proton hatchet file (expected [tree, devices] with a frame at the root)")
    devices = doc[1] if len(doc) > 1 and isinstance(doc[1], Mapping) else {}
    notes: list[str] = []
    rows = _kernel_rows(doc[0], notes)
    info, kind = _device_info(devices)
    pb = proton_peak_bandwidth(info) if info else None
    if pb:
        info["peak_bandwidth"] = pb
    return Profile(source=source, format="proton", role=role, device=device, device_kind=kind or "cuda",
                   calls=max(1, calls or 1), kernels=aggregate(rows), launches=sum(r[6] for r in rows), busy_ns=None,
                   device_info=info, notes=tuple(notes))


def _kernel_rows(root: Mapping[str, Any], notes: list[str]) -> list[tuple[Any, ...]]:
    """The kernel nodes of the tree at ``root`` as :func:`~workstation.profiles.model.aggregate`
    rows with their invocation count: ``(name, "kernel", ns, bytes, FLOPs, "", count)``; a
    note is added when the walk stops at :data:`MAX_NODES`."""
    rows: list[tuple[Any, ...]] = []
    stack: list[Any] = [root]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            notes.append(f"only the first {MAX_NODES} nodes were read")
            break
        if not isinstance(node, Mapping):
            continue
        frame, metrics = table(node.get("frame")), table(node.get("metrics"))
        ns = finite_number(metrics.get("time (ns)"))
        if ns is not None and "device_id" in metrics and isinstance(frame.get("name"), str):
            count = int(finite_number(metrics.get("count")) or 1)
            flops = [finite_number(metrics.get(k)) for k in _FLOP_KEYS]
            total_flops = sum(f for f in flops if f is not None) if any(f is not None for f in flops) else None
            rows.append((frame["name"][:500], "kernel", ns, finite_number(metrics.get("bytes")), total_flops, "",
                         max(1, count)))
        children = node.get("children")
        if isinstance(children, list):
            stack.extend(children)
    return rows


def _device_info(devices: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The first device of proton's device table: its ``type``, ``index`` and the numeric
    or text attributes kws keeps, and its kind (``cuda``, else the lowercased type);
    ``({}, "")`` when there is none."""
    for dtype, per in devices.items():
        if not isinstance(per, Mapping):
            continue
        for idx, d in per.items():
            if isinstance(d, Mapping):
                info = {"type": str(dtype), "index": str(idx),
                        **{k: d.get(k) for k in ("arch", "num_sms", "clock_rate", "memory_clock_rate", "bus_width")
                           if finite_number(d.get(k)) is not None or isinstance(d.get(k), str)}}
                return info, "cuda" if str(dtype) == "CUDA" else str(dtype).lower()
    return {}, ""
