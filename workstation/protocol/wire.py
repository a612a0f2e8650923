"""The data a job child sends back, and how the parent reads it safely.

A job writes, per step ``i``, ``step-<i>.start`` before the step runs, then
``step-<i>.json`` (metadata) and ``step-<i>.npz`` (arrays) when it ends. The output folder
is writable by the task code, so the parent reads it as hostile input:

- every file is opened relative to the folder's descriptor with ``O_NOFOLLOW`` and
  ``O_NONBLOCK`` and must be a regular file (a symlink to ``~/.ssh/id_rsa`` or a FIFO is a
  :class:`WireError`, never read); the folder itself must not be a symlink;
- sizes are checked before anything is decoded: JSON at most :data:`MAX_JSON_BYTES`; an
  ``.npz`` must be an uncompressed zip (``numpy.savez`` writes ``ZIP_STORED`` members;
  a compressed member is refused, so 1 MB cannot inflate to 1 GiB), each member a
  ``.npy`` whose header's shape and dtype (no object dtype) account exactly for its
  declared size; every byte counts against the job's :class:`Budget`
  (:data:`MAX_JOB_BYTES` unless the parent passes its ``result_bytes`` setting,
  ``KWS_RESULT_BYTES``);
- JSON is loaded with :mod:`json`, arrays with ``numpy.lib.format.read_array(...,
  allow_pickle=False)``: nothing a child writes can execute code in the parent.

Tensors travel as float64 (float dtypes: exact for every format up to fp32), int64, bool or
complex128 arrays plus their metadata.

The fork server checks each job from outside after every step
(:mod:`workstation.harness.watch`) and records the sha256 of the step's two files at that
moment (custody, :mod:`workstation.protocol.control`); the runner reads a step with those
hashes (``read_step(..., custody=...)``): each file once, into memory, used only when its
bytes are the recorded ones (:class:`CustodyError` otherwise). :func:`forging_changes`
picks, from what the server saw, the changes that let task code forge the step's result
(kws's own harness, or the modules it writes results with, patched).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workstation.protocol.extras import Extra, decode_extra
from workstation.protocol.parsing import AST_LOCK
from workstation.protocol.results import (
    ImportTime,
    Note,
    Raised,
    ResultFormatError,
    StepDoc,
    TensorMeta,
    decode_doc,
)

MAX_JSON_BYTES = 32 * 1024 * 1024
#: result bytes (JSON and arrays, as declared) the parent accepts from one job, by default
#: (the runner passes the ``result_bytes`` setting: workstation.settings).
MAX_JOB_BYTES = 768 * 1024 * 1024
#: most members of one step's ``.npz``.
MAX_MEMBERS = 4096
_MEMBER = re.compile(r"^[A-Za-z0-9_]{1,64}\.npy$")
#: namespaces of the watch table whose change lets task code forge a result (label
#: prefixes; ``numpy`` only for the functions the harness writes arrays with).
RESULT_PATH = ("workstation", "json", "os", "os.path", "posixpath", "io", "msgspec", "numpy.lib.format",
               "numpy.lib._npyio_impl", "hashlib", "traceback")
RESULT_PATH_ENTRIES = {"numpy": ("savez", "save", "ascontiguousarray", "asarray", "frombuffer"),
                       "builtins": ("open", "repr", "len", "isinstance", "getattr")}


class Budget:
    """Result bytes left for one job (thread-safe)."""

    def __init__(self, limit: int | None = None):
        self.limit = MAX_JOB_BYTES if limit is None else limit
        self.left = self.limit
        self._lock = threading.Lock()

    def take(self, n: int, what: str) -> None:
        """Count ``n`` bytes of ``what``.

        Raises:
            WireError: the job's results exceed the budget.
        """
        with self._lock:
            if n > self.left:
                raise WireError(f"{what}: the job's results exceed kws's cap of {self.limit // 2**20} MiB per job "
                                f"({n} more bytes declared, {self.left} left)")
            self.left -= n


def forging_changes(changes: list[str]) -> list[str]:
    """The entries of a verification (``"time.perf_counter replaced"``) that touch kws's
    result path (:data:`RESULT_PATH`): with them the step's result cannot be trusted."""
    out = []
    for c in changes:
        label = c.split(" ", 1)[0].rstrip(":")
        if label.startswith("sys.modules."):
            mod = label.removeprefix("sys.modules.")
            if any(mod == p or mod.startswith(p + ".") for p in RESULT_PATH):
                out.append(c)
            continue
        ns, _, key = label.rpartition(".")
        if any(label == p or label.startswith(p + ".") for p in RESULT_PATH) or key in RESULT_PATH_ENTRIES.get(ns, ()):
            out.append(c)
    return out


@dataclass
class TensorData:
    """One tensor as the parent sees it.

    Attributes:
        values: the elements as float64 / int64 / bool / complex128, in the tensor's shape.
        dtype: torch dtype name (``"float16"``).
        shape, stride: as in torch (stride in elements).
        storage_offset: in elements.
        meta: everything the child reported of it (device, data_ptr, contiguity, ...).
    """

    values: np.ndarray
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    meta: TensorMeta


@dataclass
class StepResult:
    """The outcome of one step of a job, decoded (:mod:`workstation.protocol.results`).

    Attributes:
        index: the step's position in its job.
        kind: the step's kind, as the child said (``"call"``).
        ok: False when the step's code raised; ``error`` then says what.
        error: the exception (type, message, traceback, phase, origin, causes).
        outputs: the role's outputs.
        extra: the step kind's payload (:mod:`workstation.protocol.extras`).
        arrays: the step's other named arrays.
        seconds: wall seconds of the step's task call(s).
        cpu_s: CPU seconds of the step (the job's processes; imports excluded).
        step_seconds: wall seconds of the whole step, imports included.
        imports: task file -> its import's seconds, for files imported in this step.
        notes: what backend layers observed, for the report.
        verified: what the fork server saw changed in the job after this step (None: not
            checked).
        verify_error: why the step was not checked from outside ("" when it was, or when no
            check ran).
    """

    index: int
    ok: bool
    error: Raised | None
    outputs: list[TensorData]
    extra: Extra
    arrays: dict[str, np.ndarray]
    seconds: float
    kind: str = ""
    cpu_s: float = 0.0
    step_seconds: float = 0.0
    imports: dict[str, ImportTime] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    verified: list[str] | None = None
    verify_error: str = ""

    @classmethod
    def from_doc(cls, index: int, doc: StepDoc, outputs: list[TensorData], arrays: dict[str, np.ndarray],
                 extra: Extra) -> StepResult:
        """The step result of a decoded document."""
        return cls(index=index, ok=doc.ok, error=doc.error, outputs=outputs, extra=extra, arrays=arrays,
                   seconds=doc.seconds, kind=doc.kind, cpu_s=doc.cpu_s, step_seconds=doc.step_seconds,
                   imports=dict(doc.imports),
                   notes=list(doc.notes))


class WireError(Exception):
    """A result file that does not have the expected form or size: written by task code
    (kws's harness writes well-formed files), so the step's result cannot be used."""


class CustodyError(WireError):
    """A result file whose bytes are not those kws's fork server recorded when the step was
    handed over (:mod:`workstation.protocol.control`): rewritten, added or removed by task
    code afterwards; refused, never read."""


def open_dir(path: Path) -> int:
    """A descriptor of the folder ``path`` (``O_NOFOLLOW``: a symlink is refused).

    Raises:
        WireError: ``path`` is a symlink or no folder.
    """
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise WireError(f"{path}: not a folder kws made ({e.strerror})") from None


def open_result(dir_fd: int, name: str, where: Path) -> int | None:
    """A descriptor of the regular file ``name`` in the folder ``dir_fd``, None when there
    is none.

    Raises:
        WireError: ``name`` is a symlink, a FIFO, a device or a folder.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise WireError(f"{where / name}: refused ({e.strerror}; a symlink is never followed)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WireError(f"{where / name}: not a regular file")
    return fd


def exists(dir_fd: int, name: str) -> bool:
    """True when ``name`` exists in the folder ``dir_fd`` (a symlink is not followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False


def read_tail(dir_fd: int, name: str, n: int) -> tuple[str, int]:
    """The last ``n`` bytes of the regular file ``name`` (decoded, errors replaced) and its
    size; ``("", 0)`` when there is none or it is no regular file."""
    try:
        fd = open_result(dir_fd, name, Path("."))
    except WireError:
        return "", 0
    if fd is None:
        return "", 0
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - n))
        return f.read(n).decode("utf-8", "replace"), size


def read_step(out_dir: Path, index: int, budget: Budget | None = None, dir_fd: int | None = None,
              custody: tuple[str, str] | None = None) -> StepResult | None:
    """Read step ``index`` from a job's output folder; ``None`` if it never finished.

    ``custody``: the sha256 of ``step-<i>.json`` and of ``step-<i>.npz`` (``"-"``: no such
    file) that kws's fork server recorded at the step's hand-over; each file is then read
    once into memory and used only when its bytes have that hash.

    Raises:
        CustodyError: a file's bytes are not the recorded ones (or a file is missing or
            added).
        WireError: the files exist but are malformed, too large, or not regular files.
    """
    budget = budget if budget is not None else Budget()
    own = dir_fd is None
    dfd = open_dir(out_dir) if own else dir_fd
    assert dfd is not None
    try:
        return _read_step(out_dir, index, budget, dfd, custody)
    finally:
        if own:
            os.close(dfd)


def _check_sha(data: bytes, want: str, where: Path) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise CustodyError(f"{where}: its bytes are not those kws's fork server recorded when the step was handed "
                           f"over (sha256 {got[:16]}..., recorded {want[:16] or 'none'}...): rewritten by task code "
                           "afterwards")


def _read_step(out_dir: Path, index: int, budget: Budget, dfd: int,
               custody: tuple[str, str] | None = None) -> StepResult | None:
    name = f"step-{index}.json"
    fd = open_result(dfd, name, out_dir)
    js = out_dir / name
    if fd is None:
        if custody is not None:
            raise CustodyError(f"{js}: gone after kws's fork server recorded it (removed by task code)")
        return None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise WireError(f"{js}: larger than {MAX_JSON_BYTES} bytes")
        budget.take(size, str(js))
        raw = f.read(MAX_JSON_BYTES + 1)
    if custody is not None:
        _check_sha(raw, custody[0], js)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise WireError(f"{js}: not valid JSON: {str(e)[:200]}") from None
    if not isinstance(data, dict):
        raise WireError(f"{js}: expected an object")
    arrays: dict[str, np.ndarray] = {}
    npz = out_dir / f"step-{index}.npz"
    nfd = open_result(dfd, f"step-{index}.npz", out_dir)
    if custody is not None and (nfd is None) != (custody[1] == "-"):
        if nfd is not None:
            os.close(nfd)
        raise CustodyError(f"{npz}: {'added' if nfd is not None else 'removed'} after kws's fork server recorded "
                           "the step (by task code)")
    if nfd is not None and custody is not None:
        with os.fdopen(nfd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > budget.left:
                raise WireError(f"{npz}: {size} bytes, more than the {budget.left} left of the job's result cap")
            blob = f.read(size + 1)
        _check_sha(blob, custody[1], npz)
        arrays = read_npz_file(io.BytesIO(blob), len(blob), npz, budget)
    elif nfd is not None:
        arrays = read_npz(nfd, npz, budget)
    try:
        doc = decode_doc(data)
        extra = decode_extra(doc.kind, doc.extra)
        outputs = [_tensor(m, arrays, f"out{j}") for j, m in enumerate(doc.outputs)]
    except ResultFormatError as e:
        raise WireError(f"{js}: {str(e)[:600]}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise WireError(f"{js}: malformed: {type(e).__name__}: {str(e)[:200]}") from None
    other = {k: v for k, v in arrays.items() if not k.startswith("out")}
    return StepResult.from_doc(index, doc, outputs, other, extra)


def read_npz(fd: int, where: Path, budget: Budget) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` read from ``fd`` (closed), checked as the module doc says.

    Raises:
        WireError: not an uncompressed zip of plain ``.npy`` members, sizes that do not
            add up, or more than the budget.
    """
    with os.fdopen(fd, "rb") as f:
        return read_npz_file(f, os.fstat(f.fileno()).st_size, where, budget)


def read_npz_file(f: Any, size: int, where: Path, budget: Budget) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` in the seekable binary file ``f`` of ``size`` bytes,
    checked as :func:`read_npz` says.

    Raises:
        WireError: as :func:`read_npz`.
    """
    from numpy.lib import format as npformat

    try:
        z = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise WireError(f"{where}: not a zip archive: {e}") from None
    with z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            raise WireError(f"{where}: {len(infos)} members (at most {MAX_MEMBERS})")
        declared = 0
        for info in infos:
            if not _MEMBER.match(info.filename):
                raise WireError(f"{where}: member {info.filename[:80]!r} is not a plain .npy name")
            if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                raise WireError(f"{where}: member {info.filename} is compressed "
                                f"({info.compress_size} bytes declared to inflate to {info.file_size}); "
                                "kws writes stored members only")
            declared += info.file_size
        if declared > size:
            raise WireError(f"{where}: members declare {declared} bytes in a {size}-byte file")
        budget.take(declared, str(where))
        out: dict[str, np.ndarray] = {}
        for info in infos:
            try:
                with AST_LOCK, z.open(info) as m:  # numpy parses .npy headers with ast
                    version = npformat.read_magic(m)
                    if version == (1, 0):
                        shape, fortran, dtype = npformat.read_array_header_1_0(m)
                    elif version in ((2, 0), (3, 0)):
                        shape, fortran, dtype = npformat.read_array_header_2_0(m)
                    else:
                        raise WireError(f"{where}: member {info.filename}: .npy version {version}")
                    if dtype.hasobject:
                        raise WireError(f"{where}: member {info.filename}: object arrays are refused")
                    count = 1
                    for s in shape:
                        count *= int(s)
                    header = m.tell()
                    if header + count * dtype.itemsize != info.file_size:
                        raise WireError(f"{where}: member {info.filename}: shape {shape} of {dtype} does not "
                                        f"match its {info.file_size} bytes")
                with AST_LOCK, z.open(info) as m:
                    out[info.filename[:-4]] = npformat.read_array(m, allow_pickle=False)
            except WireError:
                raise
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
                raise WireError(f"{where}: member {info.filename}: unreadable: {str(e)[:200]}") from None
    return out


def tensor_from(meta: TensorMeta | dict[str, Any], arrays: dict[str, np.ndarray], key: str) -> TensorData:
    """A :class:`TensorData` from metadata (a :class:`~workstation.protocol.results.TensorMeta`
    or the JSON object of one) and the array stored under ``key``.

    Raises:
        WireError: the metadata is malformed, the array missing, or its shape not the
            declared one.
    """
    if isinstance(meta, dict):
        import msgspec

        try:
            meta = msgspec.convert(meta, type=TensorMeta)
        except msgspec.ValidationError as e:
            raise WireError(f"output {key}: malformed metadata: {e}") from None
    return _tensor(meta, arrays, key)


def _tensor(meta: TensorMeta, arrays: dict[str, np.ndarray], key: str) -> TensorData:
    if key not in arrays:
        raise WireError(f"output {key}: missing array")
    shape = tuple(meta.shape)
    values = arrays[key]
    if tuple(values.shape) != shape:
        raise WireError(f"output {key}: array shape {values.shape} != declared {shape}")
    return TensorData(values=values, dtype=meta.dtype, shape=shape, stride=tuple(meta.stride),
                      storage_offset=meta.storage_offset, meta=meta)


def step_started(out_dir: Path, index: int, dir_fd: int | None = None) -> bool:
    """True when the child began step ``index`` (it wrote ``step-<i>.start``)."""
    if dir_fd is not None:
        return exists(dir_fd, f"step-{index}.start")
    return os.path.lexists(out_dir / f"step-{index}.start")

