"""kws's content-addressed cache: work kws did itself, kept across runs (issue 42).

What it holds (one folder per namespace under ``<cache_dir>/store/``):

- ``proofs``: ``bounds-proof``'s verdicts of one kernel, keyed by the kernel's TTIR text, the
  launch model's slot, the ``[params]`` domain and the constexpr region, the solver budget and
  the kws, Z3 versions (:func:`workstation.checks.bounds_proof`);
- ``steps``: results of the step kinds the engine keeps (the Triton AOT analysis, the
  launches and TTIR bounds-proof records), keyed by the step, the task folder's content
  digest, the device and the kws/torch/triton versions
  (:meth:`workstation.engine.context.CheckContext.result_cache_key`).

How it is kept safe: task code never writes it. The parent computes every key from data it
holds (the task folder's digest is taken before any task code runs) and writes every entry
itself, only from a result the fork server checked from outside with nothing changed; the
folder is outside every job's view (jobs see their run's temporary cache only). Each entry
stores the SHA-256 of its payload, checked on every read: a file changed on disk (a bad
disk, an editor, a hand) is a miss and is removed, never a result. Entries are written to a
temporary name and renamed (readers see a whole entry or none). The store is capped at the
``cache_bytes`` setting: after a write, the least recently used entries (by access time kws
refreshes on each hit) go first. ``kws cache clear`` empties it; ``kws cache`` says what it
holds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from workstation import settings

#: the namespaces (folders) of the store.
NAMESPACES = ("proofs", "steps")
_MAGIC = b"kws-cache-1 "
_lock = threading.Lock()


def root() -> Path:
    """The store's folder: ``<cache_dir>/store`` (the ``cache_dir`` setting)."""
    return settings.current().cache_dir / "store"


def key_of(*parts: Any) -> str:
    """A key from JSON-able ``parts`` (sorted keys; other objects by ``str``): 40 hex digits of
    their SHA-256."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:40]


@functools.cache
def code_digest(*modules: str) -> str:
    """SHA-256 (16 hex digits) of the source files of ``modules`` (dotted names): part of a
    key whose value those modules compute, so an entry kept by other code is never used."""
    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        h.update(name.encode() + b"\0")
        if origin:
            h.update(Path(origin).read_bytes())
    return h.hexdigest()[:16]


def _path(ns: str, key: str) -> Path:
    if ns not in NAMESPACES:
        raise ValueError(f"unknown cache namespace {ns!r} (one of {', '.join(NAMESPACES)})")
    if len(key) < 8 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"a cache key is hex digits (key_of), got {key!r}")
    return root() / ns / key[:2] / f"{key}.entry"


def get(ns: str, key: str) -> bytes | None:
    """The payload stored under ``key`` in ``ns``, or None (absent, unreadable, or its hash
    does not match: the entry is removed). A hit refreshes the entry's access time."""
    p = _path(ns, key)
    try:
        raw = p.read_bytes()
    except OSError:
        return None
    head, _, payload = raw.partition(b"\n")
    if not head.startswith(_MAGIC) or head[len(_MAGIC):].decode(errors="replace") != hashlib.sha256(payload).hexdigest():
        try:
            p.unlink()
        except OSError:  # already gone (another run removed it): the miss is what matters
            pass
        return None
    try:
        os.utime(p)
    except OSError:  # a read-only store still answers
        pass
    return payload


def put(ns: str, key: str, payload: bytes) -> bool:
    """Store ``payload`` under ``key`` in ``ns`` (atomically), then trim the store to the
    ``cache_bytes`` setting. False when it could not be written (a read-only or full disk:
    nothing kept, nothing else changes)."""
    p = _path(ns, key)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f"{p.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, p)
    except OSError:
        return False
    trim(settings.current().cache_bytes)
    return True


def get_json(ns: str, key: str) -> Any | None:
    """:func:`get` decoded as JSON (None on a miss or undecodable bytes)."""
    raw = get(ns, key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def put_json(ns: str, key: str, value: Any) -> bool:
    """:func:`put` of ``value`` as JSON (False when it is not JSON-able)."""
    try:
        raw = json.dumps(value, allow_nan=True).encode()
    except (TypeError, ValueError):
        return False
    return put(ns, key, raw)


def _entries() -> list[tuple[float, int, Path]]:
    out = []
    for ns in NAMESPACES:
        d = root() / ns
        if not d.is_dir():
            continue
        for p in d.glob("*/*.entry"):
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((max(st.st_atime, st.st_mtime), st.st_size, p))
    return out


def trim(cap: int) -> int:
    """Remove the least recently used entries until the store holds at most ``cap`` bytes;
    returns the bytes removed."""
    with _lock:
        entries = _entries()
        total = sum(n for _, n, _ in entries)
        removed = 0
        for _, n, p in sorted(entries):
            if total <= cap:
                break
            try:
                p.unlink()
            except OSError:
                continue
            total -= n
            removed += n
        return removed


def usage() -> dict[str, tuple[int, int]]:
    """Per namespace: (entries, bytes)."""
    out = {ns: (0, 0) for ns in NAMESPACES}
    for _, n, p in _entries():
        ns = p.parent.parent.name
        files, size = out[ns]
        out[ns] = (files + 1, size + n)
    return out


def clear() -> tuple[int, int]:
    """Remove every entry (and stray temporary files); returns (entries, bytes) removed."""
    files = size = 0
    with _lock:
        for ns in NAMESPACES:
            d = root() / ns
            if not d.is_dir():
                continue
            for p in d.glob("*/*"):
                try:
                    n = p.stat().st_size
                    p.unlink()
                except OSError:
                    continue
                if p.suffix == ".entry":
                    files, size = files + 1, size + n
    return files, size
