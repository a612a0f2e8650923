"""The data a job child sends back, and how the parent reads it safely.

A job writes, per step ``i``, ``step-<i>.start`` before the step runs, then
``step-<i>.json`` (metadata) and ``step-<i>.npz`` (arrays) when it ends. The parent loads
JSON with :mod:`json` and arrays with ``numpy.load(allow_pickle=False)``: nothing a child
writes can execute code in the parent. Tensors travel as float64 (float dtypes: exact for
every format up to fp32), int64, bool or complex128 arrays plus their metadata.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workstation.protocol.parsing import AST_LOCK

MAX_JSON_BYTES = 32 * 1024 * 1024


@dataclass
class TensorData:
    """One tensor as the parent sees it.

    Attributes:
        values: the elements as float64 / int64 / bool / complex128, in the tensor's shape.
        dtype: torch dtype name (``"float16"``).
        shape, stride: as in torch (stride in elements).
        storage_offset: in elements.
        meta: everything else the child reported (device, data_ptr, contiguity, ...).
    """

    values: np.ndarray
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    meta: dict[str, Any]


@dataclass
class StepResult:
    """The outcome of one step of a job.

    ``ok`` is False when the task code raised; ``error`` then holds ``type``, ``message``,
    ``traceback``, ``phase`` (import / make_inputs / call / ...) and ``origin``
    (``"triton-compile"`` when Triton rejected the program, else ``"task"``).
    ``outputs``: the role's outputs; ``extra``: step-specific JSON data; ``arrays``: other
    named arrays; ``seconds``: wall time of the step's task call(s).
    """

    index: int
    ok: bool
    error: dict[str, Any] | None
    outputs: list[TensorData]
    extra: dict[str, Any]
    arrays: dict[str, np.ndarray]
    seconds: float
    raw: dict[str, Any] = field(default_factory=dict)


class WireError(Exception):
    """A result file that does not have the expected form (a kws bug or a forged file)."""


def read_step(out_dir: Path, index: int) -> StepResult | None:
    """Read step ``index`` from a job's output folder; ``None`` if it never finished.

    Raises:
        WireError: the files exist but are malformed.
    """
    js = out_dir / f"step-{index}.json"
    if not js.is_file():
        return None
    if js.stat().st_size > MAX_JSON_BYTES:
        raise WireError(f"{js}: larger than {MAX_JSON_BYTES} bytes")
    try:
        data = json.loads(js.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise WireError(f"{js}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise WireError(f"{js}: expected an object")
    arrays: dict[str, np.ndarray] = {}
    npz = out_dir / f"step-{index}.npz"
    if npz.is_file():
        try:
            with AST_LOCK, np.load(npz, allow_pickle=False) as z:  # numpy parses headers with ast
                arrays = {k: z[k] for k in z.files}
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise WireError(f"{npz}: unreadable arrays: {e}") from None
    outputs = [_tensor(m, arrays, f"out{j}") for j, m in enumerate(data.get("outputs") or [])]
    other = {k: v for k, v in arrays.items() if not k.startswith("out")}
    return StepResult(
        index=index,
        ok=bool(data.get("ok")),
        error=data.get("error"),
        outputs=outputs,
        extra=data.get("extra") or {},
        arrays=other,
        seconds=float(data.get("seconds") or 0.0),
        raw=data,
    )


def tensor_from(meta: dict[str, Any], arrays: dict[str, np.ndarray], key: str) -> TensorData:
    """A :class:`TensorData` from metadata and the array stored under ``key``."""
    return _tensor(meta, arrays, key)


def _tensor(meta: dict[str, Any], arrays: dict[str, np.ndarray], key: str) -> TensorData:
    if not isinstance(meta, dict) or key not in arrays:
        raise WireError(f"output {key}: missing metadata or array")
    shape = tuple(int(s) for s in meta.get("shape", ()))
    values = arrays[key]
    if tuple(values.shape) != shape:
        raise WireError(f"output {key}: array shape {values.shape} != declared {shape}")
    return TensorData(
        values=values,
        dtype=str(meta.get("dtype")),
        shape=shape,
        stride=tuple(int(s) for s in meta.get("stride", ())),
        storage_offset=int(meta.get("storage_offset", 0)),
        meta=meta,
    )


def step_started(out_dir: Path, index: int) -> bool:
    """True when the child began step ``index`` (it wrote ``step-<i>.start``)."""
    return (out_dir / f"step-{index}.start").exists()

