"""An attached profile of a task (``[[profiles]]``), read lazily under the schema layer's
guard.

Loading a task checks each listed file's location, size and format name only; the file is
read the first time a check, ``kws profile`` or the review screen asks, through
:mod:`workstation.schema.attached` (size cap, UTF-8, JSON depth, CSV limits, read-only
SQLite with a work bound), and memoised per file version (path, size, modification time).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from workstation.profiles.model import Profile
from workstation.profiles.ncu import parse_ncu_csv
from workstation.profiles.nsys import parse_nsys_sqlite
from workstation.profiles.proton import parse_proton
from workstation.profiles.torchtrace import parse_chrome_trace
from workstation.schema.attached import open_sqlite, parse_json, read_bytes, read_csv_rows
from workstation.schema.problem import Problem
from workstation.task.format import MAX_PROFILE_BYTES
from workstation.task.model import AttachedProfile, Task

_memo: dict[tuple[str, int, int, str, str, int, str], Profile] = {}
_lock = threading.Lock()
_MEMO_MAX = 64


def read_profile(path: Path, fmt: str, *, source: str, role: str, calls: int = 0, device: str = "",
                 key: str = "") -> Profile:
    """Read the profile file ``path`` of format ``fmt`` (one of
    :data:`workstation.task.model.PROFILE_FORMATS`).

    Raises:
        Problem: naming ``path`` and ``key``: the file cannot be read under the guard, or
            its content is not a profile of that format.
    """
    try:
        if fmt == "nsys-sqlite":
            with open_sqlite(path, max_bytes=MAX_PROFILE_BYTES, key=key) as conn:
                return parse_nsys_sqlite(conn, path, source=source, role=role, calls=calls, device=device)
        raw = read_bytes(path, max_bytes=MAX_PROFILE_BYTES, key=key)
        if fmt == "ncu-csv":
            rows = read_csv_rows(raw, path, header_starts=("ID", "Kernel Name", "Process ID"), key=key)
            return parse_ncu_csv(rows, source=source, role=role, calls=calls, device=device)
        doc = parse_json(raw, path, key=key)
        if fmt == "proton":
            return parse_proton(doc, source=source, role=role, calls=calls, device=device)
        if fmt == "torch-trace":
            return parse_chrome_trace(doc, source=source, role=role, calls=calls, device=device)
    except ValueError as e:
        raise Problem(path, key, f"not a {fmt} profile: {e}") from None
    raise Problem(path, key, f"unknown profile format {fmt!r}")


def load_attached(task: Task, ap: AttachedProfile) -> Profile:
    """The profile of one ``[[profiles]]`` entry of ``task`` (memoised per file version).

    Raises:
        Problem: as :func:`read_profile`; the key is ``profiles[i].file``.
    """
    path = task.dir / ap.file
    key = f"{ap.key}.file" if ap.key else "profiles"
    try:
        st = path.stat()
    except OSError as e:
        raise Problem(path, key, f"cannot read: {e.strerror or e}") from None
    memo_key = (str(path.resolve()), st.st_size, st.st_mtime_ns, ap.format, ap.role, ap.calls, ap.device)
    with _lock:
        got = _memo.get(memo_key)
    if got is not None:
        return got
    prof = read_profile(path, ap.format, source=ap.file, role=ap.role, calls=ap.calls, device=ap.device, key=key)
    if ap.calls:
        prof = replace(prof, calls=ap.calls)
    with _lock:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[memo_key] = prof
    return prof


def load_all(task: Task) -> list[tuple[AttachedProfile, Profile | Problem]]:
    """Every attached profile of ``task`` with its profile, or the problem that kept it
    from loading (the others still load)."""
    out: list[tuple[AttachedProfile, Profile | Problem]] = []
    for ap in task.profiles:
        try:
            out.append((ap, load_attached(task, ap)))
        except Problem as e:
            out.append((ap, e))
    return out
