"""The shape every profile format is read into.

Times are nanoseconds, sizes bytes, work floating-point operations, all totals over the
calls a profile covers (``Profile.calls``): per-call figures divide by it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: what a :class:`KernelStat` is: device activity (``kernel``, ``memcpy``, ``memset``) or a
#: framework op on the host (``op``: an aten op at the outermost level of a call).
STAT_KINDS = ("kernel", "memcpy", "memset", "op")
#: the device activity kinds (they occupy the GPU).
DEVICE_KINDS = ("kernel", "memcpy", "memset")


@dataclass(frozen=True)
class KernelStat:
    """One kernel (or copy, fill, framework op) of a profile, aggregated by name.

    Attributes:
        name: as the profiler names it (a Triton kernel's function name, a CUDA kernel's
            demangled or short name, ``aten::mm``...).
        kind: one of :data:`STAT_KINDS`.
        count: invocations.
        total_ns: summed duration (ns) of the invocations, ``None`` when the profile
            has no time for it (launch tracing under the Triton interpreter).
        bytes: DRAM bytes the invocations moved (ncu's ``dram__bytes``, proton's
            ``bytes`` metric, a copy's size), ``None`` when unknown.
        flops: floating-point operations of the invocations, ``None`` when unknown.
        launched_by: the framework op whose call launched it (torch traces: the
            outermost ``aten::`` op around the launch), ``""`` when none (a Triton or
            extension launch from Python) or unknown.
    """

    name: str
    kind: str = "kernel"
    count: int = 0
    total_ns: float | None = None
    bytes: float | None = None
    flops: float | None = None
    launched_by: str = ""

    @property
    def mean_ns(self) -> float | None:
        return self.total_ns / self.count if self.total_ns is not None and self.count else None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "count": self.count, "total_ns": self.total_ns,
                "bytes": self.bytes, "flops": self.flops, "launched_by": self.launched_by}


@dataclass(frozen=True)
class Profile:
    """The device activity and framework ops of ``calls`` calls of one role.

    Attributes:
        source: ``"kws"`` for kws's own profile, else the attached file (task-relative).
        format: ``kws`` or one of :data:`workstation.task.model.PROFILE_FORMATS`.
        role: ``candidate``, ``baseline``, ``reference`` or ``mixed``.
        device: the device name the profile records (``""`` unknown).
        device_kind: ``"cuda"``, ``"cpu"`` or ``""`` (unknown).
        calls: calls covered (at least 1).
        kernels: device activity by name (kernels, copies, fills), and on the CPU the
            Triton kernels launch tracing saw (``total_ns`` None).
        ops: framework ops at the outermost level of the calls (host side).
        launches: kernel launches in total (``None`` unknown).
        busy_ns: time the device was busy (union of activity intervals; ``None`` unknown).
        wall_ns: wall time of the calls in total (``None`` unknown: no call markers).
        device_info: what the file says about the device besides its name (proton: SM
            count, clocks, bus width), for a peak when the name is not known.
        notes: what the reader could not use, in words.
    """

    source: str
    format: str
    role: str
    device: str = ""
    device_kind: str = ""
    calls: int = 1
    kernels: tuple[KernelStat, ...] = ()
    ops: tuple[KernelStat, ...] = ()
    launches: int | None = None
    busy_ns: float | None = None
    wall_ns: float | None = None
    device_info: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def device_kernels(self) -> tuple[KernelStat, ...]:
        """The stats of device activity (kernels, copies, fills)."""
        return tuple(k for k in self.kernels if k.kind in DEVICE_KINDS)

    @property
    def timed(self) -> bool:
        """True when the device activity has durations (a GPU profile)."""
        return any(k.total_ns is not None for k in self.device_kernels)

    def device_time_ns(self) -> float | None:
        """Summed duration of the device activity (ns), ``None`` when untimed."""
        ts = [k.total_ns for k in self.device_kernels if k.total_ns is not None]
        return float(sum(ts)) if ts else None

    def per_call(self, value: float | None) -> float | None:
        return value / max(1, self.calls) if value is not None else None

    def with_calls(self, calls: int) -> Profile:
        return replace(self, calls=max(1, int(calls)))


def aggregate(rows: Iterable[tuple[Any, ...]]) -> tuple[KernelStat, ...]:
    """``(name, kind, ns, bytes, flops, launched_by[, count])`` per invocation (or per
    ``count`` invocations whose totals these are) -> one :class:`KernelStat` per (name,
    kind), largest total time first (then count)."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        name, kind, ns, nbytes, flops, by = row[:6]
        n = int(row[6]) if len(row) > 6 else 1
        a = acc.setdefault((name, kind), {"count": 0, "ns": None, "bytes": None, "flops": None, "by": {}})
        a["count"] += n
        for k, v in (("ns", ns), ("bytes", nbytes), ("flops", flops)):
            if v is not None and math.isfinite(v):
                a[k] = (a[k] or 0.0) + float(v)
        if by:
            a["by"][by] = a["by"].get(by, 0) + 1
    stats = [KernelStat(name=n, kind=k, count=a["count"], total_ns=a["ns"], bytes=a["bytes"], flops=a["flops"],
                        launched_by=max(a["by"], key=a["by"].get) if a["by"] else "")
             for (n, k), a in acc.items()]
    return tuple(sorted(stats, key=lambda s: (-(s.total_ns or 0.0), -s.count, s.name)))


def finite_number(x: Any) -> float | None:
    """A value read from a profile file as a finite float; None for anything else (a
    bool, a string, NaN, an infinity)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def table(x: Any) -> Mapping[str, Any]:
    """``x`` when it is a table (a JSON object), else an empty one: a file may hold
    anything where a table is expected."""
    return x if isinstance(x, Mapping) else {}


def interval_union(spans: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of ``(start, end)`` intervals."""
    total = 0.0
    cur: tuple[float, float] | None = None  # the union's interval being extended
    for s, e in sorted(spans):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = (s, e)
        else:
            cur = (cur[0], max(cur[1], e))
    if cur is not None:
        total += cur[1] - cur[0]
    return total
