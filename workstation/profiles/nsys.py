"""Nsight Systems' SQLite export (``nsys export --type sqlite report.nsys-rep``) as a
:class:`Profile`.

Tables read (Nsight Systems "Exporter" docs, SQLite schema; missing tables are skipped):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: ``start``, ``end`` (ns), ``shortName`` /
  ``demangledName`` (ids into ``StringIds``, or text in old exports);
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``CUPTI_ACTIVITY_KIND_MEMSET``: ``start``, ``end``,
  ``bytes``;
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: launch calls (``nameId`` naming ``cudaLaunchKernel``...);
- ``NVTX_EVENTS``: ranges whose text starts with ``kws#call`` or ``ProfilerStep#`` (one
  call each: count and wall time);
- ``TARGET_INFO_GPU``: ``name`` (the device).

The database is opened read-only through the schema layer (:func:`workstation.schema.attached.open_sqlite`);
only tables are read, never views. Nsight Systems' JSON export (``--type json``) is not read:
its layout follows the report's internal event schema and changes between versions, while
the SQLite schema is documented.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from workstation.profiles.model import Profile, aggregate, interval_union
from workstation.profiles.torchtrace import CALL_MARKERS, LAUNCH_NAMES
from workstation.schema.attached import sqlite_query, sqlite_tables

MAX_ROWS = 2_000_000


#: one activity as :func:`~workstation.profiles.model.aggregate` takes it: (name, kind,
#: duration ns, bytes or None, FLOPs (never known here), launcher).
Activity = tuple[str, str, float, float | None, None, str]


def parse_nsys_sqlite(conn: sqlite3.Connection, file: Path | str, *, source: str, role: str, calls: int = 0,
                      device: str = "") -> Profile:
    """The profile of an open Nsight Systems SQLite export (module doc).

    Raises:
        ValueError: the database has no ``CUPTI_ACTIVITY_KIND_KERNEL`` table (not an
            Nsight Systems export with CUDA tracing).
        Problem: a query failed or ran past the schema layer's work bound.
    """
    tables = sqlite_tables(conn, file)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        raise ValueError("no CUPTI_ACTIVITY_KIND_KERNEL table: not an nsys SQLite export with CUDA tracing "
                         "(nsys profile --trace=cuda)")
    strings: dict[int, str] = {}
    if "StringIds" in tables:
        strings = {int(i): str(v)[:500] for i, v in sqlite_query(conn, "SELECT id, value FROM StringIds LIMIT ?",
                                                                   (MAX_ROWS,), file)
                   if isinstance(i, int) and isinstance(v, str)}
    rows, spans = _activities(conn, tables, file, strings)
    launches = _runtime_launches(conn, tables, file, strings)
    markers = _call_markers(conn, tables, file, strings)
    dev = ""
    if "name" in tables.get("TARGET_INFO_GPU", []):
        got = sqlite_query(conn, "SELECT name FROM TARGET_INFO_GPU LIMIT 1", (), file)
        if got and isinstance(got[0][0], str):
            dev = got[0][0][:200]
    notes: list[str] = []
    if len(rows) >= MAX_ROWS:
        notes.append(f"only the first {MAX_ROWS} activity rows of a table were read")
    n_kernels = sum(1 for r in rows if r[1] == "kernel")
    return Profile(source=source, format="nsys-sqlite", role=role, device=dev or device, device_kind="cuda",
                   calls=max(1, calls or len(markers) or 1), kernels=aggregate(rows),
                   launches=launches if launches is not None else n_kernels,
                   busy_ns=interval_union(spans) if spans else 0.0,
                   wall_ns=float(sum(markers)) if markers else None, notes=tuple(notes))


def _name_of(v: Any, strings: dict[int, str]) -> str:
    """A name column's value: a ``StringIds`` id looked up in ``strings``, else the text."""
    if isinstance(v, int):
        return strings.get(v, f"<string {v}>")
    return str(v)[:500] if v is not None else "?"


def _activities(conn: sqlite3.Connection, tables: dict[str, list[str]], file: Path | str,
                strings: dict[int, str]) -> tuple[list[Activity], list[tuple[int, int]]]:
    """The kernels, memcpys and memsets (at most :data:`MAX_ROWS` of each) as
    :data:`Activity` rows, and their ``(start, end)`` spans in ns.

    Raises:
        ValueError: the kernel table has no start, end or name column.
        Problem: a query failed (the schema layer's guard).
    """
    kcols = tables["CUPTI_ACTIVITY_KIND_KERNEL"]
    name_col = "shortName" if "shortName" in kcols else "demangledName" if "demangledName" in kcols else None
    if name_col is None or "start" not in kcols or "end" not in kcols:
        raise ValueError("CUPTI_ACTIVITY_KIND_KERNEL has no start/end/name columns")
    rows: list[Activity] = []
    spans: list[tuple[int, int]] = []
    for start, end, nm in sqlite_query(conn, f'SELECT start, "end", "{name_col}" FROM CUPTI_ACTIVITY_KIND_KERNEL '
                                       "LIMIT ?", (MAX_ROWS,), file):
        if not isinstance(start, int) or not isinstance(end, int) or end < start:
            continue
        rows.append((_name_of(nm, strings), "kernel", float(end - start), None, None, ""))
        spans.append((start, end))
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        cols = tables.get(table, [])
        if not {"start", "end"} <= set(cols):
            continue
        sel = '"bytes"' if "bytes" in cols else "NULL"
        for start, end, nbytes in sqlite_query(conn, f'SELECT start, "end", {sel} FROM {table} LIMIT ?',
                                               (MAX_ROWS,), file):
            if isinstance(start, int) and isinstance(end, int) and end >= start:
                rows.append((f"[{kind}]", kind, float(end - start),
                             float(nbytes) if isinstance(nbytes, int | float) else None, None, ""))
                spans.append((start, end))
    return rows, spans


def _runtime_launches(conn: sqlite3.Connection, tables: dict[str, list[str]], file: Path | str,
                      strings: dict[int, str]) -> int | None:
    """How many kernel launch calls the CUDA runtime table holds; None when it cannot tell
    (no such table or name column, or no launch function among the strings)."""
    if "nameId" not in tables.get("CUPTI_ACTIVITY_KIND_RUNTIME", []):
        return None
    ids = [i for i, v in strings.items() if v.split("_v")[0] in LAUNCH_NAMES]
    if not ids:
        return None
    marks = ",".join("?" * len(ids))
    return int(sqlite_query(conn, f"SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({marks})",
                            tuple(ids), file)[0][0])


def _call_markers(conn: sqlite3.Connection, tables: dict[str, list[str]], file: Path | str,
                  strings: dict[int, str]) -> list[int]:
    """The durations (ns) of the NVTX ranges that mark one call (their text starts with one
    of :data:`~workstation.profiles.torchtrace.CALL_MARKERS`)."""
    ncols = tables.get("NVTX_EVENTS", [])
    if not ({"start", "end"} <= set(ncols) and ("text" in ncols or "textId" in ncols)):
        return []
    text = "text" if "text" in ncols else "textId"
    markers: list[int] = []
    for start, end, t in sqlite_query(conn, f'SELECT start, "end", "{text}" FROM NVTX_EVENTS LIMIT ?',
                                      (MAX_ROWS,), file):
        label = _name_of(t, strings) if t is not None else ""
        if label.startswith(CALL_MARKERS) and isinstance(start, int) and isinstance(end, int) and end >= start:
            markers.append(end - start)
    return markers
