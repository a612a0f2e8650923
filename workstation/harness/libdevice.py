"""libdevice under Triton's interpreter: every ``__nv_<name>[f]`` symbol (of
``triton.language.extra.libdevice`` and the CUDA backend's
``triton.language.extra.cuda.libdevice``, and ``extern_elementwise``) evaluated with numpy
in float64 and rounded to the symbol's return dtype: correctly rounded, where CUDA's
libdevice is within its documented ulp bounds (CUDA C Programming Guide, "Mathematical
Functions"). Symbols it does not emulate (bit tricks such as ``__nv_brev``, directed
rounding modes) raise ``NotImplementedError`` naming them. Part of the fidelity layer
(:mod:`workstation.harness.fidelity`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from workstation.harness.lowprec import decode, encode


def _np_erfinv(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erfinv(x)


def _special(name: str) -> Callable[..., Any]:
    def f(*a: Any) -> Any:
        from scipy import special

        return getattr(special, name)(*a)

    return f


def rsqrt(x: np.ndarray) -> np.ndarray:
    """``1 / sqrt(x)`` without numpy's warnings (inf at 0, NaN below)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _div(a: np.ndarray | float, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


VEC_ERF = np.vectorize(math.erf, otypes=[np.float64])
_VEC_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
_VEC_LGAMMA = np.vectorize(lambda v: math.lgamma(v) if np.isfinite(v) and not (v <= 0 and v == int(v)) else math.inf,
                           otypes=[np.float64])
_VEC_TGAMMA = np.vectorize(lambda v: math.gamma(v) if np.isfinite(v) and not (v <= 0 and v == int(v)) else math.nan,
                           otypes=[np.float64])

#: libdevice base names (``__nv_`` prefix, ``f`` / ``fast_`` forms stripped) -> numpy.
LIBDEVICE: dict[str, Callable[..., Any]] = {
    "abs": np.abs, "fabs": np.abs, "llabs": np.abs,
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "atan2": np.arctan2, "cbrt": np.cbrt,
    "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
    "copysign": np.copysign, "cos": np.cos, "cosh": np.cosh, "sin": np.sin, "sinh": np.sinh,
    "tan": np.tan, "tanh": np.tanh, "cospi": lambda x: np.cos(np.pi * x), "sinpi": lambda x: np.sin(np.pi * x),
    "erf": VEC_ERF, "erfc": _VEC_ERFC, "erfinv": _np_erfinv, "erfcinv": lambda x: _np_erfinv(1 - x),
    "erfcx": _special("erfcx"), "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "logb": lambda x: np.floor(np.log2(np.abs(x))), "ilogb": lambda x: np.floor(np.log2(np.abs(x))),
    "pow": np.power, "powi": np.power, "fmod": np.fmod, "remainder": np.remainder,
    "fdim": lambda a, b: np.maximum(a - b, 0), "fmin": np.fmin, "fmax": np.fmax,
    "hypot": np.hypot, "rhypot": lambda a, b: 1.0 / np.hypot(a, b),
    "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: 1.0 / np.sqrt(a * a + b * b + c * c + d * d),
    "sqrt": np.sqrt, "rsqrt": rsqrt, "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "fdivide": _div, "div_rn": _div, "rcp_rn": lambda x: _div(1.0, x),
    "fma": lambda a, b, c: a * b + c, "ldexp": np.ldexp, "scalbn": np.ldexp,
    "lgamma": _VEC_LGAMMA, "tgamma": _VEC_TGAMMA,
    "j0": _special("j0"), "j1": _special("j1"), "y0": _special("y0"), "y1": _special("y1"),
    "jn": lambda n, x: _special("jv")(n, x), "yn": lambda n, x: _special("yv")(n, x),
    "cyl_bessel_i0": _special("i0"), "cyl_bessel_i1": _special("i1"),
    "normcdf": _special("ndtr"), "normcdfinv": _special("ndtri"),
    "nextafter": np.nextafter, "saturate": lambda x: np.clip(x, 0.0, 1.0),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "finite": np.isfinite,
    "signbit": np.signbit, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}

_NEEDS_NATIVE_FLOAT = {"nextafter"}  # computed in the argument's own precision


def libdevice_function(symbol: str) -> tuple[str, Callable[..., Any]] | None:
    """The numpy function for a libdevice ``symbol`` (``"__nv_tanhf"`` -> ``np.tanh``), or
    None when kws does not emulate it (bit tricks such as ``__nv_brev``, int conversions
    with explicit rounding modes)."""
    base = symbol.removeprefix("__nv_").removeprefix("fast_")
    for suffix in ("_rn", "_rz", "_rd", "_ru"):
        if base.endswith(suffix) and base[: -len(suffix)] in ("fadd", "dadd", "fmul", "dmul", "fsub", "dsub",
                                                              "fdiv", "ddiv", "fsqrt", "dsqrt", "frcp", "drcp",
                                                              "frsqrt", "fmaf", "fma"):
            if suffix != "_rn":
                return None  # directed rounding: not emulated
            base = base[: -len(suffix)]
    aliases = {"fadd": "add", "dadd": "add", "fmul": "mul", "dmul": "mul", "fsub": "sub", "dsub": "sub",
               "fdiv": "fdivide", "ddiv": "fdivide", "fsqrt": "sqrt", "dsqrt": "sqrt", "frcp": "rcp_rn",
               "drcp": "rcp_rn", "frsqrt": "rsqrt", "fmaf": "fma", "isnand": "isnan", "isinfd": "isinf",
               "isfinited": "isfinite", "signbitd": "signbit", "powif": "powi", "fdividef": "fdivide",
               "finitef": "finite"}
    simple = {"add": np.add, "mul": np.multiply, "sub": np.subtract}
    if base in aliases:
        base = aliases[base]
    if base in simple:
        return base, simple[base]
    if base in LIBDEVICE:
        return base, LIBDEVICE[base]
    if base.endswith("f") and base[:-1] in LIBDEVICE:
        return base[:-1], LIBDEVICE[base[:-1]]
    if base.endswith("f") and base[:-1] in aliases:
        b = aliases[base[:-1]]
        return b, simple.get(b) or LIBDEVICE[b]
    return None


def extern_elementwise(builder: Any, libName: str, libPath: str, symbol: str, argList: list, retType: Any,
                        isPure: bool) -> Any:
    """The interpreter builder's ``create_extern_elementwise``: ``symbol`` applied to the
    ``argList`` handles, decoded, in float64, encoded in ``retType``.

    Raises:
        NotImplementedError: kws does not emulate ``symbol``.
    """
    from triton.runtime.interpreter import TensorHandle

    found = libdevice_function(symbol)
    if found is None:
        raise NotImplementedError(
            f"kws fidelity layer: libdevice symbol {symbol!r} is not emulated under the interpreter")
    base, fn = found
    ret_scalar = getattr(retType, "scalar", retType)
    vals = []
    for a in argList:
        v = decode(a.data, a.dtype)
        if base not in _NEEDS_NATIVE_FLOAT and np.issubdtype(np.asarray(v).dtype, np.floating):
            v = np.asarray(v, dtype=np.float64)
        vals.append(v)
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*vals))
    if ret_scalar.is_int() or ret_scalar.is_bool():
        out = out.astype(np.int64)
    return TensorHandle(encode(out, ret_scalar), ret_scalar)



def wrap_libdevice() -> None:
    """Give every ``@extern`` function of the CUDA libdevice module the interpreter's
    semantic, and point the backend-neutral stub module at them."""
    import triton.language as tl
    from triton.runtime.interpreter import interpreter_semantic

    try:
        from triton.language.extra.cuda import libdevice as cuda_ld
    except ImportError:
        return
    from triton.language.extra import libdevice as stub

    def bind(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("_semantic", None)
            return fn(*args, _semantic=interpreter_semantic, **kwargs)

        call.__name__ = getattr(fn, "__name__", "libdevice")
        call.__doc__ = getattr(fn, "__doc__", None)
        call._kws_fidelity = True  # type: ignore[attr-defined]
        setattr(call, tl.core.TRITON_BUILTIN, True)  # a builtin to Triton's dependency walk
        call.signature = getattr(fn, "signature", None)  # type: ignore[attr-defined]
        return call

    for name in dir(cuda_ld):
        member = getattr(cuda_ld, name)
        if tl.core.is_builtin(member):
            bound = bind(member)
            setattr(cuda_ld, name, bound)
            if hasattr(stub, name):
                setattr(stub, name, bound)

