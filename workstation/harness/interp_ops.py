"""The Triton interpreter's operations made to compute what compiled Triton computes, where
kws can (part of the fidelity layer, :mod:`workstation.harness.fidelity`, whose
``install`` calls :func:`wrap_builder`, :func:`wrap_reductions`, :func:`wrap_scalar_args`
and :func:`wrap_tensor_likes` once per process):

- bf16 and fp8 operands (stored as raw bits, :mod:`workstation.harness.lowprec`) are
  decoded to float32 before every arithmetic op, comparison, fma, cast and ``tl.dot``, and
  the result is rounded back to nearest even; ``tl.dot`` of bf16/fp8 takes exact products
  and accumulates in the accumulator's dtype (fp32), as tensor cores do; bf16 ``tl.sum``
  adds pairwise and rounds to bf16 at each level (a tree reduction in bf16), scans round
  at each step;
- libdevice calls go to :func:`workstation.harness.libdevice.extern_elementwise`;
- a Python ``float`` kernel argument becomes an fp32 scalar (compiled Triton's typing);
- a tensor-like argument with a data pointer but no torch storage (FlagGems'
  ``StridedBuffer``) is passed through as it is;
- under :func:`poisoned_masked_loads`, masked lanes of a load without ``other=`` read
  poison (:func:`workstation.harness.lowprec.poison_bits`);
- under :func:`poisoned_stores` (the ``poison_stores`` monitor, registered here), every
  ``tl.store`` (masked or not, through a pointer block or a tensor descriptor) and every
  atomic writes poison (:func:`store_poison`) into memory instead of its value, while the
  kernels themselves still read what they stored: the stored values are kept in a *shadow*
  keyed by address, and a kernel's load (or atomic) of an address that holds the poison
  the shadow put there reads the shadow's value. So the kernels compute exactly as in a
  plain call, and only code outside them (framework ops, numpy, the host) sees poison where
  they wrote: an output element that still holds its plain value after the call did not
  come from a kernel store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from workstation.harness.libdevice import VEC_ERF, extern_elementwise, rsqrt
from workstation.harness.lowprec import (
    decode,
    encode,
    f32_to_bf16,
    is_emulated,
    poison_bits,
    tl_name,
)
from workstation.protocol.extras.monitors import PoisonMaskedLoadsReport, PoisonStoresReport
from workstation.protocol.sentinels import POISON

#: masked-load poison of this process (mutated, never rebound): on or off, and the lanes
#: that read it since :func:`poisoned_masked_loads` began.
_poison: dict[str, Any] = {"on": False, "lanes": 0}

Op = Callable[..., Any]


@contextlib.contextmanager
def poisoned_masked_loads(report: PoisonMaskedLoadsReport | None = None) -> Iterator[None]:
    """Inside the block, masked lanes of ``tl.load`` without ``other=`` read poison
    (:func:`workstation.harness.lowprec.poison_bits`). ``report.poisoned_lanes`` counts the
    lanes that did."""
    prev = _poison["on"]
    _poison["on"] = True
    _poison["lanes"] = 0
    try:
        yield
    finally:
        _poison["on"] = prev
        if report is not None:
            report.poisoned_lanes = int(_poison.get("lanes", 0))


# -- poisoned stores ------------------------------------------------------------------------

#: store poison of this process (mutated, never rebound: kws's module namespaces are
#: watched): on or off; ``patched``, the interpreter's builder carries the poisoning ops
#: (:func:`wrap_builder` ran); ``shadow``, chunks ``(lo, hi, addresses, bits)`` of the values kernels
#: stored (addresses sorted, uint64; each chunk newer than the one before); the counts of
#: :class:`~workstation.protocol.extras.monitors.PoisonStoresReport`.
_stores: dict[str, Any] = {"on": False, "shadow": [], "stores": 0, "elements": 0, "atomics": 0, "exempt": 0,
                           "restored": 0, "patched": False}
#: Triton dtype name -> the torch dtype name whose poison (``sentinels.POISON["A"]``) a store writes.
_TORCH_NAME = {"fp16": "float16", "fp32": "float32", "fp64": "float64", "bf16": "bfloat16",
               "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2", "fp8e4b8": "float8_e4m3fnuz",
               "fp8e5b16": "float8_e5m2fnuz", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
               "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
#: shadow chunks kept apart before a lookup merges them into one.
_MERGE_AT = 32


def store_poison(dtype_tt: Any) -> int | None:
    """The bits a poisoned store of Triton dtype ``dtype_tt`` writes (the quiet-NaN payloads
    and 0x5A bytes of :data:`workstation.protocol.sentinels.POISON` ``["A"]``), or None for a
    dtype that has no value to spare (``int1``, pointers): such stores keep their value."""
    name = _TORCH_NAME.get(tl_name(dtype_tt))
    return POISON["A"].get(name) if name is not None else None


@contextlib.contextmanager
def poisoned_stores(report: PoisonStoresReport | None = None) -> Iterator[None]:
    """Inside the block, kernel stores and atomics write poison and kernels read their own
    stores back from the shadow (module doc); ``report`` gets the counts."""
    prev = _stores["on"]
    _stores["shadow"].clear()
    for k in ("stores", "elements", "atomics", "exempt", "restored"):
        _stores[k] = 0
    _stores["on"] = True
    try:
        yield
    finally:
        _stores["on"] = prev
        _stores["shadow"].clear()
        if report is not None:
            report.stores, report.elements = int(_stores["stores"]), int(_stores["elements"])
            report.atomics, report.exempt = int(_stores["atomics"]), int(_stores["exempt"])
            report.restored = int(_stores["restored"])


def _record(addrs: np.ndarray, bits: np.ndarray) -> None:
    """Keep the values (raw ``bits``) a kernel stored at ``addrs`` (the last lane wins where
    one store writes an address twice)."""
    if addrs.size == 0:
        return
    order = np.argsort(addrs, kind="stable")
    a, b = addrs[order], bits[order]
    last = np.ones(a.size, dtype=bool)
    last[:-1] = a[1:] != a[:-1]
    a, b = a[last], b[last]
    _stores["shadow"].append((int(a[0]), int(a[-1]), a, b))


def _merge() -> None:
    chunks = _stores["shadow"]
    a = np.concatenate([c[2] for c in chunks])
    b = np.concatenate([c[3] for c in chunks])
    order = np.argsort(a, kind="stable")  # chunks are in time order: the newest value of an address is last
    a, b = a[order], b[order]
    last = np.ones(a.size, dtype=bool)
    last[:-1] = a[1:] != a[:-1]
    a, b = a[last], b[last]
    chunks.clear()
    chunks.append((int(a[0]), int(a[-1]), a, b))


def _lookup(addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, bits): the newest stored value of each address of ``addrs`` in the shadow."""
    if len(_stores["shadow"]) > _MERGE_AT:
        _merge()
    found = np.zeros(addrs.shape, dtype=bool)
    out = np.zeros(addrs.shape, dtype=np.uint64)
    for lo, hi, a, b in reversed(_stores["shadow"]):
        sel = ~found & (addrs >= lo) & (addrs <= hi)
        if not sel.any():
            continue
        where = np.nonzero(sel)[0]
        i = np.clip(np.searchsorted(a, addrs[where]), 0, a.size - 1)
        hit = a[i] == addrs[where]
        out[where[hit]] = b[i[hit]]
        found[where[hit]] = True
        if found.all():
            break
    return found, out


def _raw(ptrs: Any, mask: np.ndarray) -> tuple[np.ndarray, Any, type]:
    """The memory at ``ptrs`` (masked lanes read 0) as unsigned bits, with the storage's
    numpy dtype and the unsigned type of its width."""
    from triton.runtime.interpreter import _get_np_dtype, _interpreter

    np_dt = np.dtype(_get_np_dtype(ptrs.get_element_ty()))
    uint = _UINT[np_dt.itemsize]
    cur = _interpreter.load(ptrs.data, mask, np.zeros(np.shape(ptrs.data), dtype=np_dt), np_dt)
    return np.asarray(cur).view(uint), np_dt, uint


def _unpoison(ptrs: Any, mask: np.ndarray, poison: int) -> None:
    """Put back the stored values where memory at ``ptrs`` holds the poison the shadow put
    there (before an atomic reads and writes it)."""
    from triton.runtime.interpreter import _interpreter

    if not _stores["shadow"]:
        return
    cur, np_dt, uint = _raw(ptrs, mask)
    sel = mask & (cur == uint(poison))
    if not sel.any():
        return
    addrs = np.asarray(ptrs.data, dtype=np.uint64)
    found, bits = _lookup(addrs[sel])
    if not found.any():
        return
    fix = cur.copy()
    idx = np.nonzero(sel)
    fix[tuple(i[found] for i in idx)] = bits[found].astype(uint)
    put = np.zeros(sel.shape, dtype=bool)
    put[tuple(i[found] for i in idx)] = True
    _interpreter.store(ptrs.data, fix.view(np_dt), put)


def _repoison(ptrs: Any, mask: np.ndarray, poison: int) -> None:
    """Keep what an atomic left in memory at ``ptrs`` in the shadow and write poison there."""
    from triton.runtime.interpreter import _interpreter

    cur, np_dt, uint = _raw(ptrs, mask)
    addrs = np.asarray(ptrs.data, dtype=np.uint64)
    _record(addrs[mask], cur[mask].astype(np.uint64))
    _interpreter.store(ptrs.data, np.full(cur.shape, poison, dtype=uint).view(np_dt), mask)
    _stores["elements"] += int(np.count_nonzero(mask))


def _restore_loaded(ptrs: Any, mask: Any, ret: Any) -> Any:
    """A kernel's load: lanes (masked in) that read the poison of an address the shadow knows
    read the stored value instead."""
    from triton.runtime.interpreter import TensorHandle

    poison = store_poison(ptrs.get_element_ty())
    data = np.asarray(ret.data)
    if poison is None or data.dtype.itemsize not in _UINT:
        return ret
    uint = _UINT[data.dtype.itemsize]
    u = data.view(uint)
    m = np.broadcast_to(np.asarray(mask.data, dtype=bool), u.shape) & (u == uint(poison))
    if not m.any():
        return ret
    addrs = np.broadcast_to(np.asarray(ptrs.data, dtype=np.uint64), u.shape)
    found, bits = _lookup(addrs[m])
    if not found.any():
        return ret
    fixed = u.copy()
    idx = tuple(i[found] for i in np.nonzero(m))
    fixed[idx] = bits[found].astype(uint)
    _stores["restored"] += int(np.count_nonzero(found))
    return TensorHandle(fixed.view(data.dtype), ret.dtype)


def _create_masked_store(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        if not _stores["on"]:
            return orig(self, ptrs, value, mask, cache_policy)
        shape = np.shape(ptrs.data)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape)
        vals = np.broadcast_to(np.asarray(value.data), shape)
        poison = store_poison(ptrs.get_element_ty())
        if poison is None or vals.dtype.itemsize not in _UINT:
            _stores["exempt"] += int(np.count_nonzero(m))
            return orig(self, ptrs, value, mask, cache_policy)
        uint = _UINT[vals.dtype.itemsize]
        bits = np.ascontiguousarray(vals).view(uint)
        _record(np.asarray(ptrs.data, dtype=np.uint64)[m], bits[m].astype(np.uint64))
        _stores["stores"] += 1
        _stores["elements"] += int(np.count_nonzero(m))
        fill = np.full(shape, poison, dtype=uint).view(vals.dtype)
        return orig(self, ptrs, TensorHandle(fill, value.dtype), mask, cache_policy)

    return create_masked_store


def _atomic(orig: Op, ptr_at: int, mask_at: int | None) -> Op:
    """An atomic (``create_atomic_rmw``: pointer argument ``ptr_at``, mask ``mask_at``;
    ``create_atomic_cas``: no mask) under store poison: the stored values are put back where
    it reads, it runs as it would, and what it left is kept in the shadow and poisoned."""

    def atomic(self: Any, *args: Any) -> Any:
        if not _stores["on"]:
            return orig(self, *args)
        ptr = args[ptr_at]
        poison = store_poison(ptr.get_element_ty())
        shape = np.shape(ptr.data)
        m = (np.ones(shape, dtype=bool) if mask_at is None
             else np.ascontiguousarray(np.broadcast_to(np.asarray(args[mask_at].data, dtype=bool), shape)))
        if poison is None:
            _stores["exempt"] += int(np.count_nonzero(m))
            return orig(self, *args)
        _unpoison(ptr, m, poison)
        ret = orig(self, *args)
        _repoison(ptr, m, poison)
        _stores["atomics"] += 1
        return ret

    return atomic


def _create_atomic_rmw(orig: Op) -> Op:
    return _atomic(orig, 1, 3)  # (rmwOp, ptr, val, mask, sem, scope)


def _create_atomic_cas(orig: Op) -> Op:
    return _atomic(orig, 0, None)  # (ptr, cmp, val, sem, scope)


# -- the builder's elementwise ops ----------------------------------------------------------

def _binary_op(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if is_emulated(lhs.dtype) or is_emulated(rhs.dtype):
            a, b = decode(lhs.data, lhs.dtype), decode(rhs.data, rhs.dtype)
            with np.errstate(all="ignore"):
                out = op(a, b)
            if out.dtype == np.bool_:
                return TensorHandle(out, lhs.dtype.scalar)
            return TensorHandle(encode(out, lhs.dtype.scalar), lhs.dtype.scalar)
        return orig(self, lhs, rhs, op)

    return binary_op


def _unary_op(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if is_emulated(arg.dtype):
            with np.errstate(all="ignore"):
                out = op(decode(arg.data, arg.dtype))
            return TensorHandle(encode(out, arg.dtype.scalar), arg.dtype.scalar)
        return orig(self, arg, op)

    return unary_op


def _ternary_op(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is np.clip and is_emulated(other.dtype):
            out = op(decode(lhs.data, lhs.dtype), decode(rhs.data, rhs.dtype), decode(other.data, other.dtype))
            return TensorHandle(encode(out, other.dtype.scalar), other.dtype.scalar)
        return orig(self, lhs, rhs, other, op)

    return ternary_op


def _create_fma(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if is_emulated(z.dtype):
            prod = np.multiply(decode(x.data, x.dtype), decode(y.data, y.dtype), dtype=np.float64)
            out = np.add(prod, decode(z.data, z.dtype), dtype=np.float64)
            return TensorHandle(encode(out.astype(np.float32), z.dtype.scalar), z.dtype.scalar)
        return orig(self, x, y, z)

    return create_fma


def _create_dot(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if is_emulated(a.dtype) or is_emulated(b.dtype):
            acc = decode(d.data, d.dtype)
            prod = np.matmul(decode(a.data, a.dtype).astype(np.float32), decode(b.data, b.dtype).astype(np.float32),
                             dtype=np.float32)
            out = prod + acc
            if is_emulated(d.dtype):
                return TensorHandle(encode(out, d.dtype.scalar), d.dtype.scalar)
            return TensorHandle(out.astype(d.data.dtype), d.dtype.scalar)
        return orig(self, a, b, d, input_precision, max_num_imprecise_acc)

    return create_dot


def _create_rsqrt(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_rsqrt(self: Any, arg: Any) -> Any:
        if is_emulated(arg.dtype):
            return TensorHandle(encode(rsqrt(decode(arg.data, arg.dtype)), arg.dtype.scalar), arg.dtype.scalar)
        return orig(self, arg)

    return create_rsqrt


def _create_erf(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_erf(self: Any, arg: Any) -> Any:
        if is_emulated(arg.dtype):
            v = decode(arg.data, arg.dtype).astype(np.float64)
            return TensorHandle(encode(VEC_ERF(v), arg.dtype.scalar), arg.dtype.scalar)
        return orig(self, arg)

    return create_erf


def _cast_impl(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if is_emulated(src.dtype) or is_emulated(dst_type):
            v = decode(src.data, src.dtype)
            dst = dst_type.scalar
            if dst.is_int() and not dst.is_bool():
                with np.errstate(all="ignore"):
                    v = np.trunc(np.nan_to_num(np.asarray(v, dtype=np.float64)))
            return TensorHandle(encode(v, dst), dst)
        return orig(self, src, dst_type)

    return cast_impl


def _create_fp_to_fp(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if is_emulated(src.dtype) or is_emulated(dst_type):
            from triton._C.libtriton import ir as _ir

            v = decode(src.data, src.dtype)
            dst = dst_type.scalar
            if rounding_mode == _ir.ROUNDING_MODE.RTZ and tl_name(dst) == "bf16":
                f = np.asarray(v, dtype=np.float32)
                out = (f.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
                return TensorHandle(out, dst)
            return TensorHandle(encode(v, dst), dst)
        return orig(self, src, dst_type, rounding_mode)

    return create_fp_to_fp


def _create_masked_load(orig: Op) -> Op:
    from triton.runtime.interpreter import TensorHandle

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        if other is None and _poison["on"]:
            from triton.runtime.interpreter import _get_np_dtype

            dtype_tt = ptrs.get_element_ty()
            fill = poison_bits(dtype_tt)
            other = TensorHandle(np.full_like(ptrs.data, fill, dtype=_get_np_dtype(dtype_tt)), dtype_tt)
            _poison["lanes"] = _poison.get("lanes", 0) + int(np.count_nonzero(~mask.data))
        ret = orig(self, ptrs, mask, other, cache_policy, is_volatile)
        if _stores["on"] and _stores["shadow"]:
            return _restore_loaded(ptrs, mask, ret)
        return ret

    return create_masked_load


def _create_extern_elementwise(orig: Op | None) -> Op:
    def create_extern_elementwise(self: Any, libName: str, libPath: str, symbol: str, argList: list[Any],
                                  retType: Any, isPure: bool) -> Any:
        return extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure)

    return create_extern_elementwise


#: the builder methods replaced: name -> the replacement made from the original.
_BUILDER_OPS: dict[str, Callable[[Any], Op]] = {
    "binary_op": _binary_op, "unary_op": _unary_op, "ternary_op": _ternary_op, "create_fma": _create_fma,
    "create_dot": _create_dot, "create_rsqrt": _create_rsqrt, "create_erf": _create_erf, "cast_impl": _cast_impl,
    "create_fp_to_fp": _create_fp_to_fp, "create_masked_load": _create_masked_load,
    "create_extern_elementwise": _create_extern_elementwise, "create_masked_store": _create_masked_store,
    "create_atomic_rmw": _create_atomic_rmw, "create_atomic_cas": _create_atomic_cas,
}
#: the builder's casts, all routed through ``cast_impl``.
_CASTS = ("create_si_to_fp", "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_fp_ext",
          "create_fp_trunc")


def wrap_builder(ib_cls: Any) -> None:
    """Patch the interpreter's ``InterpreterBuilder`` class ``ib_cls`` (module doc)."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    # every original is read (and every replacement made) before the first is patched
    originals = {name: getattr(ib_cls, name) for name in _BUILDER_OPS if name != "create_extern_elementwise"}
    replaced = {name: make(originals.get(name)) for name, make in _BUILDER_OPS.items()}
    for name, fn in replaced.items():
        setattr(ib_cls, name, fn)
    for name in _CASTS:
        setattr(ib_cls, name, lambda self, src, dst_type: self.cast_impl(src, dst_type))
    ib_cls.create_int_cast = lambda self, src, dst_type, is_signed: self.cast_impl(src, dst_type)
    ib_cls.get_bf16 = lambda self, value: TensorHandle(f32_to_bf16(np.array([value], dtype=np.float32)), tl.bfloat16)
    _stores["patched"] = True


# -- reductions and scans -----------------------------------------------------------------

def tree_sum(v: np.ndarray, axis: int | None, keep: bool, dt: Any) -> np.ndarray:
    """Sum of ``v`` (float32 values of emulated dtype ``dt``) along ``axis`` (None: all),
    adding halves pairwise and rounding to ``dt`` at each level."""
    v = np.asarray(v, dtype=np.float32)
    if axis is None:
        v = v.reshape(-1)
        ax = 0
    else:
        ax = axis
    v = np.moveaxis(v, ax, -1)
    n = v.shape[-1]
    while n > 1:
        if n % 2:
            v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,), dtype=v.dtype)], axis=-1)
            n += 1
        v = decode(encode(v[..., : n // 2] + v[..., n // 2:], dt), dt)
        n //= 2
    out = v[..., 0] if v.shape[-1] else np.zeros(v.shape[:-1], np.float32)
    if keep:
        out = np.expand_dims(out, axis if axis is not None else 0)
    return out


def _to_tensor_values(op: Any, values: Any, dtype: Any) -> Any:
    """``ReduceScanOpInterface.to_tensor`` for float values of an emulated dtype."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    scalar = dtype.scalar
    arr = np.asarray(values)
    if arr.shape:
        return tl.core.tensor(TensorHandle(encode(arr, scalar), scalar), tl.block_type(scalar, list(arr.shape)))
    return tl.core.tensor(TensorHandle(encode(arr.reshape(1), scalar), scalar), scalar)


def _sum(orig: Op) -> Op:
    def sum_(self: Any, input: Any) -> Any:
        if is_emulated(input.dtype):
            dt = input.dtype.scalar
            out = tree_sum(decode(input.handle.data, dt), self.axis, self.keep_dims, dt)
            return _to_tensor_values(self, out, input.dtype)
        return orig(self, input)

    return sum_


def _min_max(orig: Op) -> Op:
    import triton.language as tl

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        inp = input[0] if isinstance(input, tuple) else input
        if not is_emulated(inp.dtype):
            return orig(self, input, val_reduce_op, idx_reduce_op)
        v = decode(inp.handle.data, inp.dtype)
        val = idx = None
        if val_reduce_op:
            val = _to_tensor_values(self, val_reduce_op(v, axis=self.axis, keepdims=self.keep_dims), inp.dtype)
        if idx_reduce_op:
            idx = self.to_tensor(idx_reduce_op(v, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    return min_max


def _scan(orig: Op, npfn: Any) -> Op:
    def scan(self: Any, input: Any) -> Any:
        if is_emulated(input.dtype):
            dt = input.dtype.scalar
            v = decode(input.handle.data, dt).astype(np.float32)
            out = np.moveaxis(v, self.axis, 0).copy()
            for i in range(1, out.shape[0]):
                out[i] = decode(encode(npfn(out[i - 1], out[i]), dt), dt)
            return [_to_tensor_values(self, np.moveaxis(out, 0, self.axis), input.dtype)]
        return orig(self, input)

    return scan


def wrap_reductions() -> None:
    """Patch the interpreter's ``tl.sum``, ``tl.min``/``tl.max`` (with their index forms)
    and ``tl.cumsum``/``tl.cumprod`` for emulated dtypes (module doc)."""
    from triton.runtime import interpreter as I

    I.ReduceOps.sum = _sum(I.ReduceOps.sum)
    I.ReduceOps.min_max = _min_max(I.ReduceOps.min_max)
    I.ScanOps.cumsum = _scan(I.ScanOps.cumsum, np.add)
    I.ScanOps.cumprod = _scan(I.ScanOps.cumprod, np.multiply)


# -- kernel arguments -----------------------------------------------------------------------

def wrap_scalar_args() -> None:
    """A Python ``float`` kernel argument becomes an fp32 scalar (``_implicit_cvt``)."""
    import triton.language as tl
    from triton.runtime import interpreter as I

    orig = I._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(I.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return orig(arg)

    I._implicit_cvt = implicit_cvt


class _Opaque:
    """Stands for a tensor-like kernel argument (``data_ptr`` and ``dtype`` but no torch
    storage the interpreter can copy, e.g. FlagGems' ``StridedBuffer``) while the
    interpreter copies arguments."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj


def _is_tensor_like(a: Any) -> bool:
    """An argument with a data pointer that is neither a torch tensor nor Triton's
    ``TensorWrapper`` (whose storage the interpreter knows how to copy)."""
    if not hasattr(a, "data_ptr"):
        return False
    import torch
    from triton.runtime.jit import TensorWrapper

    return not isinstance(a, torch.Tensor | TensorWrapper)


def wrap_tensor_likes() -> None:
    """The interpreter copies each argument with a ``data_ptr`` to the host through its
    torch storage; an argument that has a data pointer but no storage (it already lives in
    CPU memory here) is passed through as it is, as compiled Triton passes its pointer."""
    from triton.runtime import interpreter as I

    ge = I.GridExecutor
    orig_init = ge._init_args_hst
    orig_restore = ge._restore_args_dev

    def hide(args: Any) -> Any:
        return [_Opaque(a) if _is_tensor_like(a) else a for a in args]

    def show(args: Any) -> Any:
        return [a.obj if isinstance(a, _Opaque) else a for a in args]

    def init_args_hst(self: Any, args_dev: Any, kwargs: dict[str, Any]) -> Any:
        args_hst, kwargs_hst = orig_init(self, hide(args_dev), {k: (_Opaque(v) if _is_tensor_like(v) else v)
                                                                 for k, v in kwargs.items()})
        return show(args_hst), {k: (v.obj if isinstance(v, _Opaque) else v) for k, v in kwargs_hst.items()}

    def restore_args_dev(self: Any, args_dev: Any, args_hst: Any, kwargs: dict[str, Any],
                         kwargs_hst: dict[str, Any]) -> Any:
        keep = [not _is_tensor_like(a) for a in args_dev]
        kw = [k for k, v in kwargs.items() if not _is_tensor_like(v)]
        return orig_restore(self, [a for a, k in zip(args_dev, keep, strict=False) if k],
                            [a for a, k in zip(args_hst, keep, strict=False) if k],
                            {k: kwargs[k] for k in kw}, {k: kwargs_hst[k] for k in kw})

    ge._init_args_hst = init_args_hst
    ge._restore_args_dev = restore_args_dev


# -- the poison_stores monitor ------------------------------------------------------------

def _register_monitor() -> None:
    try:
        from workstation.harness import monitor
        from workstation.protocol.steps import PoisonStores
    except ImportError:  # pragma: no cover  (the AOT child imports the fidelity layer alone)
        return

    @monitor(PoisonStores)
    def _poison_stores(ctx: Any, spec: PoisonStores, report: PoisonStoresReport) -> Any:
        """Kernel stores and atomics write poison while the role runs (interpreter only;
        :func:`poisoned_stores`), from call ``spec.from_call`` of the step's repeats on."""

        @contextlib.contextmanager
        def cm() -> Iterator[None]:
            report.active = bool(_stores["patched"])
            if not report.active:
                report.why = "not under the Triton interpreter (compiled kernels' stores cannot be poisoned)"
                yield
                return
            if spec.from_call <= 1:
                with poisoned_stores(report):
                    yield
                return
            # the poison starts with call `from_call`: the job context's call is wrapped for
            # the step (an instance attribute over the method, removed at the end)
            with contextlib.ExitStack() as stack:
                plain_call = ctx.timed_call
                n = [0]

                def timed_call(fn: Any, inputs: tuple) -> Any:
                    n[0] += 1
                    if n[0] == spec.from_call:
                        stack.enter_context(poisoned_stores(report))
                    return plain_call(fn, inputs)

                ctx.timed_call = timed_call
                try:
                    yield
                finally:
                    del ctx.timed_call

        return cm()


_register_monitor()
