"""Nsight Compute CSV exports (``ncu --csv``) as a :class:`Profile`.

Two layouts are read (Nsight Compute CLI docs, "Console Output" / ``--page``):

- the **details** page (``ncu --csv ...``, ``ncu -i report.ncu-rep --csv``): one row per
  kernel launch and metric, columns ``ID``, ``Kernel Name``, ``Section Name``,
  ``Metric Name``, ``Metric Unit``, ``Metric Value`` (and ``Device``, ``Block Size``...
  in recent versions);
- the **raw** page (``--page raw``): one row per launch, one column per metric, the
  second row holding the units.

Per launch: the duration (``gpu__time_duration.sum``, or the details page's ``Duration``),
DRAM bytes (``dram__bytes.sum``, else ``dram__bytes_read.sum`` + ``dram__bytes_write.sum``,
else ``dram__bytes.sum.per_second`` x duration), FLOPs as Nsight Compute's roofline counts
them (``sm__sass_thread_inst_executed_op_{h,f,d}{add,mul}_pred_on.sum`` + 2 x ``..fma..``:
CUDA-core FLOPs; tensor-core work is not in these counters), and the device name
(``device__attribute_display_name``). Units are Nsight Compute's (``nsecond``,
``usecond``, ``msecond``, ``second``; ``byte``, ``Kbyte``... in powers of 1000, ``KiB``...
in powers of 1024; ``/second`` rates); values may carry thousands separators. Lines
before the header (``==PROF==`` log lines of ``--log-file``) are skipped.

Nsight Compute's own Python module (``ncu_report``, PyPI ``ncu-report``) reads the binary
``.ncu-rep`` reports; it is a 53 MB native library, so kws reads the CSV export instead
(``ncu -i report.ncu-rep --csv --page raw > report.csv`` converts one): docs/profiles.md.
"""

from __future__ import annotations

import re
from typing import Any

from workstation.profiles.model import Profile, aggregate

_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BIN = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_FLOP_OPS = [(f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum", 2.0 if op == "fma" else 1.0)
             for p in ("h", "f", "d") for op in ("add", "mul", "fma")]
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d+)*|\d*\.\d+)([eE][+-]?\d+)?$")


def byte_factor(unit: str) -> float | None:
    """Bytes per unit of ``unit`` (``Kbyte`` -> 1000, ``MiB`` -> 2**20; ``None``: not a
    byte unit)."""
    u = unit.strip().lower().removesuffix("/second")
    for suffix in ("byte", "b"):
        if u.endswith(suffix):
            pre = u[: -len(suffix)]
            if pre in _BIN:
                return _BIN[pre]
            if pre in _SI:
                return _SI[pre]
    return None


def _value(text: str) -> float | None:
    t = text.strip().replace("\u202f", "")
    if not _NUMBER.match(t):
        return None
    if "," in t:  # thousands separators ("152,192"); a decimal comma is not Nsight Compute's
        t = t.replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def _scaled(name: str, unit: str, value: float) -> float:
    """``value`` of metric ``name`` in kws's units: ns for times, bytes (and bytes/s) for
    sizes; counts and percentages unchanged."""
    u = unit.strip()
    if u in _TIME:
        return value * _TIME[u]
    f = byte_factor(u)
    if f is not None:
        return value * f
    return value


def parse_ncu_csv(rows: list[list[str]], *, source: str, role: str, calls: int = 0, device: str = "") -> Profile:
    """The profile of an ``ncu --csv`` export's rows (header first; module doc).

    Raises:
        ValueError: the header has no ``Kernel Name`` column, or the details layout lacks
            its metric columns.
    """
    if not rows:
        raise ValueError("the CSV file is empty")
    header = [h.strip() for h in rows[0]]
    if "Kernel Name" not in header:
        raise ValueError("no 'Kernel Name' column: not an ncu --csv export")
    col = {h: i for i, h in enumerate(header)}
    launches = _details_launches(rows, header, col) if "Metric Name" in col else _raw_launches(rows, header, col)
    out = []
    devices = set()
    untimed = 0
    for rec in launches.values():
        row = _kernel_row(rec["name"], rec["m"])
        if row[2] is None:
            untimed += 1
        out.append(row)
        if rec.get("device"):
            devices.add(rec["device"])
    notes: list[str] = []
    if untimed:
        notes.append(f"{untimed} launch(es) without gpu__time_duration.sum (collect it: --metrics gpu__time_duration.sum)")
    if len(devices) > 1:
        notes.append(f"launches on several devices: {', '.join(sorted(devices))}")
    return Profile(source=source, format="ncu-csv", role=role, device=(sorted(devices)[0] if devices else device),
                   device_kind="cuda", calls=max(1, calls or 1), kernels=aggregate(out), launches=len(out),
                   busy_ns=None, notes=tuple(notes))


def _details_launches(rows: list[list[str]], header: list[str], col: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The launches of the details layout (one row per launch and metric), by launch id:
    ``{"name": kernel name, "m": {metric: value in kws's units}, "device": name}``.

    Raises:
        ValueError: the ``Metric Value`` or ``Metric Unit`` column is missing.
    """
    for need in ("Metric Value", "Metric Unit"):
        if need not in col:
            raise ValueError(f"details layout without a {need!r} column")
    launches: dict[str, dict[str, Any]] = {}
    for r in rows[1:]:
        if len(r) < len(header):
            continue
        lid = r[col["ID"]] if "ID" in col else str(len(launches))
        rec = launches.setdefault(lid, {"name": r[col["Kernel Name"]], "m": {}})
        mname = r[col["Metric Name"]].strip()
        raw = r[col["Metric Value"]]
        v = _value(raw)
        if mname == "device__attribute_display_name" or (v is None and mname.endswith("display_name")):
            rec["device"] = raw.strip()[:200]
        elif v is not None:
            key = "gpu__time_duration.sum" if mname == "Duration" else mname
            rec["m"][key] = _scaled(key, r[col["Metric Unit"]], v)
    return launches


def _raw_launches(rows: list[list[str]], header: list[str], col: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The launches of the raw layout (one row per launch, one column per metric, an
    optional units row), by launch id, as :func:`_details_launches` gives them."""
    k = col["Kernel Name"]
    has_units = len(rows) > 1 and len(rows[1]) > k and not rows[1][k].strip()
    units = rows[1] if has_units else []
    data = rows[2:] if has_units else rows[1:]
    launches: dict[str, dict[str, Any]] = {}
    for n, r in enumerate(data):
        if len(r) < len(header):
            continue
        lid = r[col["ID"]] if "ID" in col else str(n)
        rec = launches.setdefault(lid, {"name": r[col["Kernel Name"]], "m": {}})
        for i, h in enumerate(header):
            if h == "device__attribute_display_name":
                rec["device"] = r[i].strip()[:200]
                continue
            v = _value(r[i])
            if v is not None and "__" in h:
                rec["m"][h] = _scaled(h, units[i] if i < len(units) else "", v)
    return launches


def _kernel_row(name: Any, m: dict[str, float]) -> tuple[str, str, float | None, float | None, float | None, str]:
    """One launch as :func:`~workstation.profiles.model.aggregate` takes it: (name, kind,
    duration ns, DRAM bytes, FLOPs, launcher); a figure its metrics do not give is None
    (module doc: which metrics, in which order of preference)."""
    ns = m.get("gpu__time_duration.sum")
    nbytes = m.get("dram__bytes.sum")
    if nbytes is None and ("dram__bytes_read.sum" in m or "dram__bytes_write.sum" in m):
        nbytes = m.get("dram__bytes_read.sum", 0.0) + m.get("dram__bytes_write.sum", 0.0)
    if nbytes is None and "dram__bytes.sum.per_second" in m and ns:
        nbytes = m["dram__bytes.sum.per_second"] * ns * 1e-9
    flops = None
    if any(k in m for k, _ in _FLOP_OPS):
        flops = sum(m.get(k, 0.0) * w for k, w in _FLOP_OPS)
    return (str(name)[:500], "kernel", ns, nbytes, flops, "")
