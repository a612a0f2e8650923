"""Bit patterns that mark memory nobody wrote: poison values and guard-band bytes.

Shared by the child side (:mod:`workstation.harness.guards` fills buffers with them) and
the parent side (``unwritten-output`` and ``out-of-bounds`` compare the raw bits the child
sends back against them). Torch-free, so the parent may import it.

- *Poison* fills every write-only buffer the candidate receives (``out_args``, and every
  ``torch.empty*`` allocation made during its call). Two scenarios use two different
  poisons, so an element that still holds poison ``A`` in one run and poison ``B`` in the
  other was never written: no computed value equals both. Float poisons are quiet NaNs
  with a payload (a kernel that computes NaN produces the canonical NaN, not these bits);
  integer poisons repeat the bytes 0x5A / 0xC3 (KernelBench-style sentinels). Formats with
  a single NaN encoding (fp8 e4m3fn has two, the fnuz formats one) get the NaN they have.
  ``bool`` and complex outputs are not poisoned (no invalid value to spare).
- *Guard bytes* (0xA5) fill the bands kws places before and after a buffer; a guard byte
  that changed after the call was written through an out-of-bounds address.

Bits are compared as unsigned integers of the element's width, in the child's byte order
(little-endian on every platform torch supports).
"""

from __future__ import annotations

import numpy as np

#: the byte every guard band is filled with.
GUARD_BYTE = 0xA5

#: element size in bytes of each dtype kws can poison or guard.
ELEMENT_SIZE: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "uint16": 2, "uint32": 4, "uint64": 8,
    "complex64": 8, "complex128": 16,
}

#: poison bit patterns (unsigned, element width) per scenario ("A": a fresh process,
#: "B": after the reference ran in the same process).
POISON: dict[str, dict[str, int]] = {
    "A": {
        "float64": 0x7FF8A5A5A5A5A5A5, "float32": 0x7FC5A5A5, "float16": 0x7E5A,
        "bfloat16": 0x7FDA, "float8_e4m3fn": 0x7F, "float8_e5m2": 0x7E,
        "float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80,
        "int64": 0x5A5A5A5A5A5A5A5A, "int32": 0x5A5A5A5A, "int16": 0x5A5A, "int8": 0x5A,
        "uint8": 0x5A, "uint16": 0x5A5A, "uint32": 0x5A5A5A5A, "uint64": 0x5A5A5A5A5A5A5A5A,
    },
    "B": {
        "float64": 0xFFF8C3C3C3C3C3C3, "float32": 0xFFC3C3C3, "float16": 0xFE3C,
        "bfloat16": 0xFFC3, "float8_e4m3fn": 0xFF, "float8_e5m2": 0xFE,
        "float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80,
        "int64": 0xC3C3C3C3C3C3C3C3, "int32": 0xC3C3C3C3, "int16": 0xC3C3, "int8": 0xC3,
        "uint8": 0xC3, "uint16": 0xC3C3, "uint32": 0xC3C3C3C3, "uint64": 0xC3C3C3C3C3C3C3C3,
    },
}

SCENARIOS = {
    "A": "a fresh process, before the reference ran",
    "B": "after the reference ran in the same process (recycled memory)",
}

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def poison_bits(dtype: str, scenario: str) -> int | None:
    """The poison of ``dtype`` in ``scenario`` as an unsigned integer of the element's
    width, or ``None`` when kws does not poison that dtype (bool, complex)."""
    return POISON[scenario].get(dtype)


def poison_value(dtype: str, scenario: str) -> float | int | None:
    """The value (float64 / int) the poison of ``dtype`` decodes to (NaN for floats)."""
    bits = poison_bits(dtype, scenario)
    if bits is None:
        return None
    arr = np.array([bits], dtype=np.uint64).astype(_UINT[ELEMENT_SIZE[dtype]])
    value: float | int = decode(arr, dtype)[0].item()
    return value


def is_float_nan_poison(dtype: str) -> bool:
    """True when the poison of ``dtype`` is a NaN (every floating dtype)."""
    return dtype.startswith(("float", "bfloat"))


def as_uint(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Reinterpret an array of raw element bits (any integer dtype of the element's width,
    as the child sends them) as unsigned integers of that width."""
    size = ELEMENT_SIZE[dtype]
    a = np.ascontiguousarray(bits)
    if a.dtype.itemsize != size:
        raise ValueError(f"bits of {dtype} must be {size}-byte integers, got {a.dtype}")
    return a.view(_UINT[size])


def bytes_to_elements(raw: np.ndarray, dtype: str) -> np.ndarray:
    """A guard band's raw bytes (uint8, length a multiple of the element size) as one
    unsigned integer per element."""
    size = ELEMENT_SIZE[dtype]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.size % size:
        raise ValueError(f"{raw.size} bytes is not a whole number of {dtype} elements")
    return raw.view(_UINT[size]) if size in _UINT else raw.reshape(-1, size)


def guard_element(dtype: str) -> int:
    """The guard fill of one ``dtype`` element as an unsigned integer (bytes 0xA5)."""
    return int.from_bytes(bytes([GUARD_BYTE]) * ELEMENT_SIZE[dtype], "little")


def decode(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Values (float64; int64 for integer dtypes) of raw element bits, for evidence.

    Supports fp64/fp32/fp16/bf16, fp8 e4m3fn/e5m2 (IEEE-style decoding, OCP FP8 spec) and
    integer dtypes; other dtypes come back as the unsigned bits themselves.
    """
    u = as_uint(bits, dtype) if dtype in ELEMENT_SIZE and ELEMENT_SIZE[dtype] in _UINT else np.asarray(bits)
    if dtype == "float64":
        return u.view(np.float64).astype(np.float64)
    if dtype == "float32":
        return u.view(np.float32).astype(np.float64)
    if dtype == "float16":
        return u.view(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in ("float8_e4m3fn", "float8_e5m2"):
        e_bits, m_bits, bias = (4, 3, 7) if dtype == "float8_e4m3fn" else (5, 2, 15)
        v = u.astype(np.int64)
        sign = np.where(v >> 7, -1.0, 1.0)
        e = (v >> m_bits) & ((1 << e_bits) - 1)
        m = v & ((1 << m_bits) - 1)
        val = np.where(e == 0, m * 2.0 ** (1 - bias - m_bits),
                       (1 + m / 2.0 ** m_bits) * np.exp2(e.astype(np.float64) - bias))
        if dtype == "float8_e4m3fn":
            val = np.where((e == 15) & (m == 7), np.nan, val)
        else:
            val = np.where(e == 31, np.where(m == 0, np.inf, np.nan), val)
        return sign * val
    if dtype.startswith(("int", "uint")):
        signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[ELEMENT_SIZE[dtype]]
        return (u.view(signed) if dtype.startswith("int") else u).astype(np.int64)
    return u.astype(np.float64)
