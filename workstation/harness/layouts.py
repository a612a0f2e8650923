"""Child-side layout transforms for the ``noncontiguous`` check: same values, other strides.

One transform, ``layout`` (:class:`~workstation.protocol.steps.Layout`, e.g.
``Layout(kind="column-slice", args=[0, 1])``), rebuilds each tensor input listed in
``args`` as a view with the layout ``kind`` (:data:`KINDS`). Every kind except ``expand``
keeps the logical values bit for bit, so the reference can run on the untransformed
(contiguous) inputs. ``expand`` makes every slice along dim 0 equal to the first one (a
stride-0 view, as ``t.expand`` or broadcasting produces); with ``materialize`` the result
is copied back to a contiguous tensor, which is what the reference gets so that both roles
see the same logical values.

Memory a view does not cover (the padding of a wider buffer) is filled with NaN for
floating dtypes and 0 otherwise, so a kernel that reads outside the view it was given
turns the output into NaN instead of silently reading plausible numbers.

The layouts are the ones production code hands kernels (task format v1,
``contiguous_only = false``; PyTorch's strided tensor model):

- ``padded-rows``: ``buf[..., :N]`` of a buffer whose rows are padded to a multiple of 64
  elements plus 64: ``stride(-1) == 1`` but ``stride(-2) > N``. A kernel that derives the
  row stride from the shape reads the wrong rows.
- ``column-slice``: ``buf[..., N:2N]`` of a ``(..., 3N)`` buffer (``qkv[:, k:2k]``): row
  stride 3N and a storage offset of N elements.
- ``row-step``: ``buf[::2]`` along dim 0 (every other row of a taller buffer).
- ``col-step``: ``buf[..., ::2]``: ``stride(-1) == 2``, no unit inner stride.
- ``transposed``: ``x.transpose(-1, -2).contiguous().transpose(-1, -2)``: the same values
  in column-major order (``stride(-2) == 1``), as ``a.t()`` of a row-major matrix gives.
- ``misaligned``: a contiguous view starting one element into its buffer, so
  ``data_ptr() % 16 != 0`` for element sizes below 16 bytes. Triton specialises pointer
  arguments on divisibility by 16 (``triton.runtime.jit``'s ``specialization``); a kernel
  compiled for, or assuming, aligned pointers must still be correct here.
- ``expand``: ``x.narrow(0, 0, 1).expand_as(x)`` (``stride(0) == 0``).

A tensor for which a kind is not a layout change (a 1-D tensor has no rows to pad or
transpose; dim 0 of size 1 cannot step or expand) is left as it is; ``extra["inputs"]``
of the call step records every input's strides and offset.
"""

from __future__ import annotations

from typing import Any

import torch

from workstation.harness import transform
from workstation.protocol.layouts import KINDS, applies
from workstation.protocol.steps import Layout


def _fill_value(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return False
    return 0


def _buffer(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A new buffer of ``shape`` filled with the padding value of ``like``'s dtype."""
    buf = torch.empty(shape, dtype=like.dtype, device=like.device)
    try:
        buf.fill_(_fill_value(like.dtype))
    except (RuntimeError, TypeError):  # dtypes without a NaN fill (some float8 formats)
        buf.zero_()
    return buf


def relayout(x: torch.Tensor, kind: str) -> torch.Tensor:
    """``x`` rebuilt with the layout ``kind`` (values equal to ``x``'s, except ``expand``).

    Raises:
        ValueError: an unknown kind.
    """
    shape = tuple(x.shape)
    if kind not in KINDS:
        raise ValueError(f"unknown layout kind {kind!r}; known: {', '.join(KINDS)}")
    if not applies(kind, shape):
        return x
    if kind == "padded-rows":
        n = shape[-1]
        padded = (n + 63) // 64 * 64 + 64
        buf = _buffer((*shape[:-1], padded), x)
        view = buf[..., :n]
    elif kind == "column-slice":
        n = shape[-1]
        buf = _buffer((*shape[:-1], 3 * n), x)
        view = buf[..., n:2 * n]
    elif kind == "row-step":
        buf = _buffer((2 * shape[0], *shape[1:]), x)
        view = buf[::2]
    elif kind == "col-step":
        buf = _buffer((*shape[:-1], 2 * shape[-1]), x)
        view = buf[..., ::2]
    elif kind == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif kind == "misaligned":
        buf = _buffer((x.numel() + 1,), x)
        view = buf[1:].view(shape)
    else:  # expand
        return x.narrow(0, 0, 1).expand_as(x)
    view.copy_(x)
    return view


@transform(Layout)
def _layout(ctx: Any, inputs: tuple, spec: Layout) -> tuple:
    """Relayout the tensor inputs at ``spec.args`` to ``spec.kind`` (module doc);
    ``spec.materialize``: copy the result back to contiguous memory (the reference's
    side of a value-changing kind)."""
    kind = spec.kind
    args = set(spec.args)
    out = []
    for i, x in enumerate(inputs):
        if i in args and isinstance(x, torch.Tensor):
            y = relayout(x, kind)
            if spec.materialize:
                y = y.contiguous()
            out.append(y)
        else:
            out.append(x)
    return tuple(out)
