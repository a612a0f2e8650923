"""bfloat16 and fp8 as Triton's interpreter stores them (raw bits: ``uint16``, ``uint8``)
and their values: exact decoding to float32, encoding rounded to nearest even (fp8
saturated to the largest finite value, NaN kept), and the bits masked lanes read under
poison (:func:`poison_bits`). Part of the fidelity layer (:mod:`workstation.harness.fidelity`).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def bf16_to_f32(u: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16, any shape) -> float32 values (exact)."""
    return (np.asarray(u).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays
    a quiet NaN with its sign; overflow rounds to ±inf as IEEE rounding does."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = np.isnan(a)
    out = rounded.astype(np.uint16)
    if np.any(nan):
        out = np.where(nan, ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), out)
    return out


_FP8_TORCH = {
    "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2",
    "fp8e4b8": "float8_e4m3fnuz", "fp8e5b16": "float8_e5m2fnuz",
}
_FP8_MAX = {"fp8e4nv": 448.0, "fp8e5": 57344.0, "fp8e4b8": 240.0, "fp8e5b16": 57344.0}


def tl_name(dt: Any) -> str:
    """The name of Triton dtype ``dt`` (``"bf16"``, ``"fp8e4nv"``, ``"fp32"``)."""
    return getattr(dt, "name", str(dt))


def is_emulated(dt: Any) -> bool:
    """True for the dtypes the interpreter stores as raw bits (bf16, fp8)."""
    name = tl_name(getattr(dt, "scalar", dt))
    return name == "bf16" or name in _FP8_TORCH


def decode(data: np.ndarray, dt: Any) -> np.ndarray:
    """Values of the interpreter's storage ``data`` of Triton dtype ``dt``: bf16 and fp8 as
    float32, everything else unchanged."""
    name = tl_name(getattr(dt, "scalar", dt))
    if name == "bf16":
        return bf16_to_f32(data)
    if name in _FP8_TORCH:
        import torch

        t = torch.from_numpy(np.ascontiguousarray(np.asarray(data, dtype=np.uint8))).view(getattr(torch, _FP8_TORCH[name]))
        return t.to(torch.float32).numpy().reshape(np.shape(data))
    return data


def encode(values: np.ndarray, dt: Any) -> np.ndarray:
    """The interpreter's storage for ``values`` in Triton dtype ``dt``: bf16 rounded to
    nearest even, fp8 rounded to nearest even and saturated to the largest finite value
    (NaN stays NaN), other dtypes ``astype``."""
    from triton.runtime.interpreter import _get_np_dtype

    scalar = getattr(dt, "scalar", dt)
    name = tl_name(scalar)
    v = np.asarray(values)
    if name == "bf16":
        return f32_to_bf16(v.astype(np.float32))
    if name in _FP8_TORCH:
        import torch

        f = v.astype(np.float32)
        m = _FP8_MAX[name]
        f = np.where(np.isnan(f), f, np.clip(f, -m, m))
        t = torch.from_numpy(np.ascontiguousarray(f)).to(getattr(torch, _FP8_TORCH[name]))
        return t.view(torch.uint8).numpy().reshape(v.shape)
    return v.astype(_get_np_dtype(scalar))



def poison_bits(dtype_tt: Any) -> Any:
    """The value masked lanes of a load without ``other=`` read under poison: NaN (as its
    storage bits for bf16/fp8) for floats, the ``0x5A`` repeated byte for integers."""
    name = tl_name(dtype_tt)
    if name == "bf16":
        return np.uint16(0x7FDA)
    if name in _FP8_TORCH:
        return np.uint8(0x80 if name in ("fp8e4b8", "fp8e5b16") else 0x7F)
    if getattr(dtype_tt, "is_floating", lambda: False)():
        return np.nan
    if getattr(dtype_tt, "is_bool", lambda: False)() or name == "int1":
        return True
    width = getattr(dtype_tt, "primitive_bitwidth", 32)
    val = int("5A" * (width // 8), 16)
    if getattr(dtype_tt, "is_int_signed", lambda: False)() and val >= 1 << (width - 1):
        val -= 1 << width
    return val

