"""Out-of-process evidence: the fork server reads a job's memory to see what it patched.

Anything a job reports about itself can be forged by the task code running in it (a
candidate can replace ``workstation.harness.state.snapshot`` so ``tampering`` compares two
copies of the same clean snapshot). This module lets a process the task code cannot reach
— the fork server, outside the job's pid namespace — check the job's namespaces itself.

Before it forks any job, the fork server builds a :class:`WatchTable` from its own memory:
for every watched namespace (the modules and classes ``tampering`` snapshots, kws's own
harness and protocol modules and their classes, the modules the harness writes results
with, ``sys.modules``) the address of the namespace's ``dict`` and, for every entry whose
value is a module, a class or a callable, the addresses of the key and value objects. A
forked job has the same memory layout (fork copies it), so after each step the server
stops the job (``SIGSTOP``: every thread), reads those dicts back from the job's memory
with ``process_vm_readv(2)``, lets it continue (``SIGCONT``) and reports every entry whose
value object changed or that disappeared: ``time.perf_counter replaced``,
``workstation.harness.state.snapshot replaced``. New entries are ignored (lazy imports add
them). Non-callable values (flags, counters) are not watched (``tampering``'s in-process
snapshot compares those).

The reader knows CPython's dict layout (``PyDictObject`` → ``ma_keys`` → the entry table,
"general" and "unicode" entry kinds, CPython 3.11–3.13); :meth:`WatchTable.build`
calibrates it by parsing the server's own memory (through :func:`ctypes.string_at`) and
comparing with the table Python's own iteration gives; when they differ the verifier is
off and every report says why.

Functions are compared inside too: for every Python function among the watched entries
(a class's static and class methods, and the implementation behind a NumPy
``_ArrayFunctionDispatcher`` such as ``numpy.savez``, included) the table holds the
addresses its ``__code__``, ``__defaults__``, ``__kwdefaults__`` and ``__closure__``
pointed to, and for the functions of kws's own modules and of the modules it writes
results with (:data:`CELL_PREFIXES`) the object each closure cell holds when that is
callable; a job that swaps ``json.dumps.__code__`` is reported as ``json.dumps code
replaced``. The offsets of those fields in ``PyFunctionObject`` / ``PyCellObject`` are
found by :func:`_calibrate` from the server's own objects, never assumed.

What it cannot see: a task that writes the dict entries back through :mod:`ctypes`
before the step ends, or restores what it patched before returning; a code object edited
in place through :mod:`ctypes` (its bytes are not compared); functions reached only
through other objects (an instance's bound method, a ``functools.partial``); state
outside the watched namespaces.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import os
import struct
import sys
import types
from dataclasses import dataclass, field
from typing import Any

#: modules whose namespaces are watched besides kws's own (``workstation.*``) and those
#: of :mod:`workstation.harness.state` (what ``tampering`` snapshots).
EXTRA_MODULES = (
    "json", "json.encoder", "json.decoder", "zipfile", "struct", "stat", "numpy", "numpy.lib._format_impl",
    "os", "os.path", "posixpath", "io", "hashlib", "traceback", "importlib", "importlib.util",
    "msgspec", "msgspec.json", "numpy.lib.format", "numpy.lib._npyio_impl", "torch.profiler",
    "torch.autograd", "torch.autograd.profiler", "torch.utils._python_dispatch", "torch.overrides",
    "torch._C", "torch.utils.cpp_extension", "triton.runtime", "triton.runtime.jit",
)
#: ``sys.modules`` entries are watched for these prefixes (a replaced module object).
SYS_MODULES_PREFIXES = ("workstation.", "torch", "numpy", "triton", "time", "math", "builtins", "json", "os")
#: namespaces (label prefixes) whose functions' closure cells are compared too: kws's own
#: and those it writes results with (a library's own lazily filled cells would be noise).
CELL_PREFIXES = ("workstation", "json", "numpy", "msgspec", "zipfile", "hashlib", "io", "os")
#: classes whose dicts are watched besides those of :data:`workstation.harness.state.CLASSES`
#: and kws's own (the encoder behind ``json.dumps``, the zip writer behind ``numpy.savez``).
EXTRA_CLASSES = ("json.encoder.JSONEncoder", "json.decoder.JSONDecoder", "zipfile.ZipFile", "zipfile.ZipInfo")
#: most entries read per dict (a dict larger than this is cut: a huge forged table).
MAX_ENTRIES = 1 << 16
_HEADER = struct.Struct("<qQqQQQ")  # refcnt, type, ma_used, ma_version_tag, ma_keys, ma_values
_KEYS = struct.Struct("<qBBBxIqq")  # dk_refcnt, log2_size, log2_index_bytes, kind, version, usable, nentries
_GENERAL, _UNICODE = 0, 1


class VerifyError(Exception):
    """The job's memory could not be read (it died, or the kernel refused)."""


@dataclass
class Namespace:
    """One watched dict: ``label`` (``"time"``, ``"torch.Tensor"``), its address, and the
    watched entries: key object address -> (key text, value object address)."""

    label: str
    address: int
    entries: dict[int, tuple[str, int]] = field(default_factory=dict)
    _arrays: Any = None

    def arrays(self) -> tuple[Any, Any, list[str]]:
        """(key addresses, value addresses, key texts) of the watched entries."""
        if self._arrays is None:
            import numpy as np

            items = list(self.entries.items())
            self._arrays = (np.array([k for k, _ in items], dtype="<u8"),
                            np.array([v for _, (_, v) in items], dtype="<u8"), [n for _, (n, _) in items])
        return self._arrays


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_vm_readv: Any = None


def _readv(pid: int, spans: list[tuple[int, int]]) -> list[bytes]:
    """Read ``(address, size)`` spans of process ``pid``'s memory in one
    ``process_vm_readv`` call per 512 spans.

    Raises:
        VerifyError: the call failed or read less than asked (an unmapped address).
    """
    global _vm_readv
    if _vm_readv is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = lib.process_vm_readv
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec),
                       ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_ssize_t
        _vm_readv = fn
    out: list[bytes] = []
    for start in range(0, len(spans), 512):
        chunk = spans[start:start + 512]
        bufs = [ctypes.create_string_buffer(max(1, n)) for _, n in chunk]
        local = (_Iovec * len(chunk))(*[_Iovec(ctypes.cast(b, ctypes.c_void_p), n) for b, (_, n) in zip(bufs, chunk, strict=True)])
        remote = (_Iovec * len(chunk))(*[_Iovec(a, n) for a, n in chunk])
        want = sum(n for _, n in chunk)
        got = _vm_readv(pid, local, len(chunk), remote, len(chunk), 0)
        if got < 0:
            err = ctypes.get_errno()
            raise VerifyError(f"process_vm_readv({pid}): {os.strerror(err)}")
        if got != want:  # a partial read stops at the first unreadable span: read one by one
            for (a, n) in chunk:
                try:
                    out.extend(_readv(pid, [(a, n)]) if len(chunk) > 1 else [b""])
                except VerifyError:
                    out.append(b"")
            continue
        out.extend(b.raw[:n] for b, (_, n) in zip(bufs, chunk, strict=True))
    return out


def _own(spans: list[tuple[int, int]]) -> list[bytes]:
    return [ctypes.string_at(a, n) for a, n in spans]


def _words_via(reader: Any) -> Any:
    """A ``read_words(addresses, n)`` (:meth:`_Inside.changes`) built on a span reader."""
    import numpy as np

    def read_words(addrs: Any, n: int) -> Any:
        blobs = reader([(int(a), n * 8) for a in addrs])
        return np.array([np.frombuffer(b, dtype="<u8") if len(b) == n * 8 else np.zeros(n, "<u8") for b in blobs],
                        dtype="<u8").reshape(len(addrs), n)

    return read_words


def _fixed_reader(reader: Any, words: Any) -> Any:
    """``fixed(addresses, size) -> list[bytes]``: spans of one size, through ``words`` (one
    buffer, :func:`_readv_words`) when given, else through the span ``reader``; an
    unreadable span is ``b""``."""
    if words is None:
        return lambda addrs, size: reader([(a, size) for a in addrs])

    def fixed(addrs: list[int], size: int) -> list[bytes]:
        import numpy as np

        if not addrs:
            return []
        rows = words(np.array(addrs, dtype="<u8"), size // 8)
        return [r.tobytes() if r.any() else b"" for r in rows]

    return fixed


#: most iovecs one ``process_vm_readv`` call takes (``IOV_MAX``).
_IOV_MAX = 1024


def _readv_words(pid: int, addrs: Any, n: int) -> Any:
    """``n`` words (uint64) at each of ``addrs`` in process ``pid``'s memory, as a
    ``len(addrs)`` x ``n`` array, read with one ``process_vm_readv`` per :data:`_IOV_MAX`
    spans into one buffer (no Python object per span); a span that cannot be read is a
    row of zeros.

    Raises:
        VerifyError: the call failed.
    """
    import numpy as np

    _readv(pid, [])  # binds process_vm_readv once
    count, size = len(addrs), n * 8
    out = np.zeros((count, n), dtype="<u8")
    base = out.ctypes.data
    for start in range(0, count, _IOV_MAX):
        k = min(_IOV_MAX, count - start)
        local = np.empty((k, 2), dtype="<u8")
        local[:, 0] = base + (start + np.arange(k, dtype="<u8")) * size
        local[:, 1] = size
        remote = np.empty((k, 2), dtype="<u8")
        remote[:, 0] = addrs[start:start + k]
        remote[:, 1] = size
        got = _vm_readv(pid, local.ctypes.data_as(ctypes.POINTER(_Iovec)), k,
                        remote.ctypes.data_as(ctypes.POINTER(_Iovec)), k, 0)
        if got < 0:
            err = ctypes.get_errno()
            raise VerifyError(f"process_vm_readv({pid}): {os.strerror(err)}")
        if got != k * size:  # stopped at an unreadable span: read the rest one by one
            done = got // size
            out[start + done] = 0
            for i in range(start + done, start + k):
                try:
                    out[i] = np.frombuffer(_readv(pid, [(int(addrs[i]), size)])[0], dtype="<u8")
                except (VerifyError, ValueError):
                    out[i] = 0
    return out


def _parse_entries(keys_blob: bytes) -> tuple[Any, Any] | None:
    """(key addresses, value addresses) as uint64 arrays of a ``PyDictKeysObject`` (its
    header, indices and entries in ``keys_blob``; deleted entries dropped); None when the
    header does not look like one."""
    import numpy as np

    size = _keys_size(keys_blob)
    if size is None or size > len(keys_blob):
        return None
    _, _, log2_idx, kind, _, _, nentries = _KEYS.unpack_from(keys_blob)
    width = 3 if kind == _GENERAL else 2
    arr = np.frombuffer(keys_blob, dtype="<u8", count=nentries * width,
                        offset=_KEYS.size + (1 << log2_idx)).reshape(nentries, width)
    k, v = arr[:, width - 2], arr[:, width - 1]
    live = k != 0
    return k[live], v[live]


def _keys_size(keys_blob: bytes) -> int | None:
    if len(keys_blob) < _KEYS.size:
        return None
    _, log2_size, log2_idx, kind, _, _, nentries = _KEYS.unpack_from(keys_blob)
    if kind not in (_GENERAL, _UNICODE) or not 0 <= nentries <= MAX_ENTRIES or log2_size > 30:
        return None
    return _KEYS.size + (1 << log2_idx) + nentries * (24 if kind == _GENERAL else 16)


def _watched(v: Any) -> bool:
    return isinstance(v, types.ModuleType | type) or callable(v)


#: the fields of a Python function compared (label, attribute).
FUNCTION_FIELDS = (("code", "__code__"), ("defaults", "__defaults__"), ("keyword defaults", "__kwdefaults__"),
                   ("closure", "__closure__"))


def _function_of(v: Any) -> types.FunctionType | None:
    """The Python function behind a namespace entry: the entry itself, a static or class
    method's function, or a NumPy dispatcher's ``_implementation``; None for anything else."""
    if isinstance(v, types.FunctionType):
        return v
    if isinstance(v, staticmethod | classmethod) and isinstance(v.__func__, types.FunctionType):
        return v.__func__
    if type(v).__name__ == "_ArrayFunctionDispatcher":
        impl = getattr(v, "_implementation", None)
        if isinstance(impl, types.FunctionType):
            return impl
    return None


def _calibrate() -> tuple[tuple[int, ...], int]:
    """Byte offsets of ``__code__``, ``__defaults__``, ``__kwdefaults__``, ``__closure__``
    in this Python's function object, and of the content in a closure cell, found by
    searching a sample function's and cell's memory for those objects' addresses.

    Raises:
        VerifyError: a field is not found exactly once.
    """
    held = len

    def outer() -> Any:
        def sample(a: float = 1.5, *, b: float = 2.5) -> Any:
            return held

        return sample

    fn = outer()
    words = struct.unpack(f"<{type(fn).__basicsize__ // 8}Q", ctypes.string_at(id(fn), type(fn).__basicsize__ // 8 * 8))
    offsets = []
    for name, attr in FUNCTION_FIELDS:
        hits = [i for i, w in enumerate(words) if w == id(getattr(fn, attr))]
        if len(hits) != 1:
            raise VerifyError(f"the function object's {name} field was found {len(hits)} times")
        offsets.append(hits[0] * 8)
    cell = fn.__closure__[0]
    size = type(cell).__basicsize__ // 8
    cw = struct.unpack(f"<{size}Q", ctypes.string_at(id(cell), size * 8))
    hits = [i for i, w in enumerate(cw) if w == id(held)]
    if len(hits) != 1:
        raise VerifyError(f"the closure cell's content was found {len(hits)} times")
    return tuple(offsets), hits[0] * 8


@dataclass
class _Inside:
    """The watched insides of functions: per function its label, address and the expected
    addresses of :data:`FUNCTION_FIELDS`; per watched cell its label, address and content."""

    offsets: tuple[int, ...]
    cell_offset: int
    functions: list[tuple[str, int, tuple[int, ...]]]
    cells: list[tuple[str, int, int]]

    _arrays: Any = None

    def arrays(self) -> tuple[Any, Any, Any, Any]:
        """(function addresses, expected fields (n x 4), cell addresses, expected contents)
        as uint64 arrays."""
        if self._arrays is None:
            import numpy as np

            self._arrays = (np.array([a for _, a, _ in self.functions], dtype="<u8"),
                            np.array([w for _, _, w in self.functions], dtype="<u8").reshape(-1, len(FUNCTION_FIELDS)),
                            np.array([a for _, a, _ in self.cells], dtype="<u8"),
                            np.array([w for _, _, w in self.cells], dtype="<u8"))
        return self._arrays

    def changes(self, read_words: Any) -> list[str]:
        """What changed, read with ``read_words(addresses, words)``: a uint64 array of
        ``len(addresses)`` rows of ``words`` words each (a row of zeros: unreadable)."""
        import numpy as np

        fa, want, ca, cwant = self.arrays()
        lo, hi = min(self.offsets), max(self.offsets) + 8
        got = read_words(fa + np.uint64(lo), (hi - lo) // 8)
        cols = [(off - lo) // 8 for off in self.offsets]
        out: list[str] = []
        bad = got[:, cols] != want
        for i in np.flatnonzero(bad.any(axis=1)):
            label = self.functions[i][0]
            if not got[i].any():
                out.append(f"{label}: its function object could not be read")
                continue
            out += [f"{label} {name} replaced" for (name, _), b in zip(FUNCTION_FIELDS, bad[i], strict=True) if b]
        cgot = read_words(ca + np.uint64(self.cell_offset), 1)[:, 0]
        out += [f"{self.cells[i][0]} closure variable replaced" for i in np.flatnonzero(cgot != cwant)]
        return out


def _module_spaces(names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(label, namespace) of each module of ``names``, imported where it is not yet (a module
    this install lacks is left out)."""
    spaces: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except Exception:  # noqa: BLE001  (a module this install lacks)
                continue
        spaces.append((name, vars(mod)))
    return spaces


def _classes(class_paths: tuple[str, ...], own: list[str]) -> list[tuple[str, type]]:
    """(label, class) of ``class_paths`` + :data:`EXTRA_CLASSES` (those that import) and of
    every class defined at the top of the ``own`` modules."""
    classes: list[tuple[str, type]] = []
    for path in tuple(dict.fromkeys(class_paths + EXTRA_CLASSES)):
        mod_name, _, attr = path.rpartition(".")
        try:
            classes.append((path, getattr(importlib.import_module(mod_name), attr)))
        except (ImportError, AttributeError):
            continue
    for name in own:
        mod = sys.modules[name]
        for k, v in list(vars(mod).items()):
            if isinstance(v, type) and v.__module__ == name:
                classes.append((f"{name}.{k}", v))
    return classes


def _class_spaces(classes: list[tuple[str, type]]) -> list[tuple[str, dict[str, Any]]]:
    """(label, the dict behind the class's mapping proxy) of each class."""
    import gc

    spaces: list[tuple[str, dict[str, Any]]] = []
    for label, c in classes:
        inner = [r for r in gc.get_referents(c.__dict__) if type(r) is dict]
        if inner:
            spaces.append((label, inner[0]))
    return spaces


def _namespace(label: str, d: dict[str, Any]) -> Namespace:
    """The watched entries of namespace ``d`` (string keys whose value is watched)."""
    ns = Namespace(label, id(d))
    for k, v in list(d.items()):
        if isinstance(k, str) and _watched(v):
            ns.entries[id(k)] = (k, id(v))
    return ns


def _insides(spaces: list[tuple[str, dict[str, Any]]]
             ) -> tuple[list[tuple[str, int, tuple[int, ...]]], list[tuple[str, int, int]], list[Any]]:
    """The functions among the entries of ``spaces`` (each once) with the addresses of their
    :data:`FUNCTION_FIELDS`, the callable closure cells of those in :data:`CELL_PREFIXES`
    namespaces with their contents' addresses, and what holds those objects alive."""
    functions: list[tuple[str, int, tuple[int, ...]]] = []
    cells: list[tuple[str, int, int]] = []
    seen_fn: set[int] = set()
    held: list[Any] = []
    for label, d in spaces:
        deep = label.startswith(CELL_PREFIXES)
        for k, v in list(d.items()):
            fn = _function_of(v) if isinstance(k, str) else None
            if fn is None or id(fn) in seen_fn:
                continue
            seen_fn.add(id(fn))
            fields = tuple(getattr(fn, a) for _, a in FUNCTION_FIELDS)
            held.append((fn, fields))
            # an absent field (None to Python) is a NULL pointer in the object
            functions.append((f"{label}.{k}", id(fn), tuple(0 if f is None else id(f) for f in fields)))
            if deep:
                cells += _callable_cells(f"{label}.{k}", fn)
    return functions, cells, held


def _callable_cells(label: str, fn: types.FunctionType) -> list[tuple[str, int, int]]:
    """(label, cell address, content address) of each closure cell of ``fn`` that holds a
    callable (an empty cell is left out)."""
    out: list[tuple[str, int, int]] = []
    for j, cell in enumerate(fn.__closure__ or ()):
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(content):
            out.append((f"{label}[{fn.__code__.co_freevars[j]}]", id(cell), id(content)))
    return out


class WatchTable:
    """The watched namespaces of a process and a reader of another process's copy of
    them (module doc). Build with :meth:`build` in the fork server before forking."""

    def __init__(self, namespaces: list[Namespace], reason: str = ""):
        self.namespaces = namespaces
        #: why the verifier is off ("" when it works).
        self.reason = reason
        #: the functions' insides compared (None: namespaces only).
        self.inside: _Inside | None = None
        #: what keeps the watched objects alive (their addresses are never reused).
        self._keep: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.reason

    @classmethod
    def build(cls, module_names: tuple[str, ...] = (), class_paths: tuple[str, ...] = ()) -> WatchTable:
        """The table for ``module_names`` + :data:`EXTRA_MODULES` + every loaded
        ``workstation.*`` module (and the classes they define), ``class_paths`` and
        ``sys.modules``, calibrated against this process's own memory."""
        if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
            return cls([], f"the verifier reads CPython 3.11-3.13 dicts; this is {sys.implementation.name} "
                           f"{sys.version.split()[0]}")
        own = sorted(n for n in sys.modules if n == "workstation" or n.startswith("workstation."))
        spaces = _module_spaces(list(dict.fromkeys(module_names + EXTRA_MODULES)) + own)
        classes = _classes(class_paths, own)
        spaces += _class_spaces(classes)
        mods = {k: v for k, v in sys.modules.items() if isinstance(k, str) and k.startswith(SYS_MODULES_PREFIXES)}
        namespaces = [_namespace(label, d) for label, d in spaces]
        try:
            offsets, cell_offset = _calibrate()
        except (VerifyError, struct.error, ValueError) as e:
            return cls([], f"the verifier cannot find a function's code in this Python ({e})")
        functions, cells, held = _insides(spaces)
        sm = Namespace("sys.modules", id(sys.modules))
        for k in list(sys.modules):
            if k in mods:
                sm.entries[id(k)] = (k, id(mods[k]))
        namespaces.append(sm)
        table = cls(namespaces)
        table.inside = _Inside(offsets, cell_offset, functions, cells)
        # calibration: parse our own memory with the same reader
        try:
            mine = table._read(_own)
        except Exception as e:  # noqa: BLE001  (said: the verifier is off, and every report says why)
            return cls([], f"the verifier cannot parse this Python's dicts ({type(e).__name__}: {e})")
        bad = [c for c in mine if c]
        if bad:
            return cls([], f"the verifier's dict reader disagrees with this Python ({len(bad)} namespaces, "
                           f"first: {bad[0][0]})")
        # the keys above hold the entries alive: keep references so no address is reused
        # (the job inherits this table: there too the old fields stay alive, so a swapped
        # field's address is never handed to a new object)
        table._keep = (spaces, classes, mods, held)
        return table

    def entry_count(self) -> int:
        """Watched entries over every namespace, plus the functions and cells compared inside."""
        inside = len(self.inside.functions) + len(self.inside.cells) if self.inside is not None else 0
        return sum(len(n.entries) for n in self.namespaces) + inside

    def verify(self, pid: int) -> list[str]:
        """What changed in process ``pid``'s copy of the watched namespaces: one line per
        changed entry (``"time.perf_counter replaced"``, ``"... removed"``) or per
        namespace that is no dict any more.

        Raises:
            VerifyError: the memory could not be read.
        """
        if not self.ok:
            raise VerifyError(self.reason)
        return self._read(lambda spans: _readv(pid, spans), lambda addrs, n: _readv_words(pid, addrs, n))

    def _read(self, reader: Any, words: Any = None) -> list[str]:
        fixed = _fixed_reader(reader, words)
        heads = fixed([ns.address for ns in self.namespaces], _HEADER.size)
        dict_type = id(dict)
        changes: list[str] = []
        key_spans: list[tuple[int, int]] = []
        live: list[Namespace] = []
        for ns, h in zip(self.namespaces, heads, strict=True):
            if len(h) < _HEADER.size:
                changes.append(f"{ns.label}: its namespace could not be read")
                continue
            _, tp, _, _, keys, values = _HEADER.unpack(h)
            if tp != dict_type or values != 0 or keys == 0:
                changes.append(f"{ns.label}: its namespace is no plain dict any more")
                continue
            key_spans.append((keys, _KEYS.size))
            live.append(ns)
        khead = fixed([a for a, _ in key_spans], _KEYS.size)
        full_spans: list[tuple[int, int]] = []
        full_ns: list[Namespace] = []
        for ns, (addr, _), kh in zip(live, key_spans, khead, strict=True):
            size = _keys_size(kh)
            if size is None:
                changes.append(f"{ns.label}: its key table is corrupt")
                continue
            full_spans.append((addr, size))
            full_ns.append(ns)
        blobs = reader(full_spans)
        import numpy as np

        for ns, blob in zip(full_ns, blobs, strict=True):
            got = _parse_entries(blob)
            if got is None:
                changes.append(f"{ns.label}: its key table is corrupt")
                continue
            keys, vals = got
            want_k, want_v, names = ns.arrays()
            order = np.argsort(keys, kind="stable")
            sk, sv = keys[order], vals[order]
            pos = np.searchsorted(sk, want_k)
            pos_c = np.minimum(pos, max(len(sk) - 1, 0))
            found = (pos < len(sk)) & (sk[pos_c] == want_k) if len(sk) else np.zeros(len(want_k), bool)
            same = found & (sv[pos_c] == want_v) if len(sk) else found
            for i in np.flatnonzero(~same):
                changes.append(f"{ns.label}.{names[i]} {'replaced' if found[i] else 'removed'}")
        if self.inside is not None:
            changes += self.inside.changes(words or _words_via(reader))
        return changes
