"""Child-side accuracy-contract oracle: the ``contract_round`` monitor
(:class:`~workstation.protocol.steps.ContractRound`).

A task may declare the precision its kernel computes in by design (``[contract]
compute_dtype``, ``accumulate``; docs/task-format.md). The oracle for such a contract is the
reference evaluated on float64 inputs with **each floating operation's result rounded to the
compute dtype** and held in float64 again: Higham's standard model of floating-point
arithmetic, ``fl(x op y) = (x op y)(1 + d)``, ``|d| <= u`` (N. J. Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., 2002, §2.2), applied at the granularity of
aten ops. A ``TorchDispatchMode`` does it:

- every aten op asked for a narrower float dtype (``x.float()``, ``.to(torch.float16)``)
  gets float64 instead (as the ``keep_float64`` monitor), so the reference's own casts do
  not decide the precision: the contract does;
- the floating outputs of every op are rounded to ``compute`` and back to their dtype
  (float64); an in-place or ``out=`` op's written tensor is rounded in place; views and
  other aliasing results are left alone (they hold values already rounded);
- with ``accumulate`` equal to ``compute`` (``accumulate = "input"``), the sums and
  matmuls listed in :data:`ACCUMULATING` are evaluated as recursive sums whose every
  product and partial sum is rounded to ``compute`` (a kernel accumulating in the input
  dtype); with ``accumulate = "float32"`` only their result is rounded (fp32 accumulation
  is exact next to fp16/bf16 rounding). Other reductions (``softmax``, ``logsumexp``,
  norms) always round their result only.

The report (``extra.monitors.contract_round``, a
:class:`~workstation.protocol.extras.monitors.ContractRoundReport`): ``compute``,
``accumulate``, ``rounded`` / ``accumulated`` / ``kept`` (aten op name -> times).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch

from workstation.harness import monitor
from workstation.harness.core import JobContext
from workstation.protocol.extras.monitors import ContractRoundReport
from workstation.protocol.steps import ContractRound

_NARROW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
#: aten ops whose accumulation is emulated in the compute dtype under ``accumulate = "input"``.
ACCUMULATING = ("sum", "mean", "mm", "bmm", "addmm", "dot", "mv")


def _seq_sum(x: torch.Tensor, dims: list[int], rnd: Any) -> torch.Tensor:
    """The recursive sum of ``x`` over ``dims`` with every partial sum rounded by ``rnd``
    (keepdim False)."""
    nd = x.dim()
    dims = sorted({d % nd for d in dims}) if nd else []
    if not dims:
        return rnd(x.clone())
    rest = [d for d in range(nd) if d not in dims]
    y = x.permute(*rest, *dims).reshape(*[x.shape[d] for d in rest], -1)
    acc = torch.zeros(y.shape[:-1], dtype=x.dtype, device=x.device)
    for k in range(y.shape[-1]):
        acc = rnd(acc + y[..., k])
    return acc


def _seq_mm(a: torch.Tensor, b: torch.Tensor, rnd: Any) -> torch.Tensor:
    """``a @ b`` (``[..., M, K] @ [..., K, N]``) with every product and partial sum rounded."""
    acc = torch.zeros((*a.shape[:-1], b.shape[-1]), dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    for k in range(a.shape[-1]):
        acc = rnd(acc + rnd(a[..., k:k + 1] * b[..., k:k + 1, :]))
    return acc


def _accumulate(name: str, args: tuple, kwargs: dict, rnd: Any) -> torch.Tensor | None:
    """The result of an :data:`ACCUMULATING` op accumulated at the compute dtype, or None
    when this overload is not one the harness emulates (its result is then rounded once)."""
    a = list(args)
    if name in ("sum", "mean"):
        x = a[0]
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or kwargs.get("dtype") is not None:
            return None
        dims = a[1] if len(a) > 1 and a[1] is not None else kwargs.get("dim")
        keepdim = bool(a[2] if len(a) > 2 else kwargs.get("keepdim", False))
        dl = list(range(x.dim())) if dims is None or (isinstance(dims, list | tuple) and not dims) else (
            [dims] if isinstance(dims, int) else list(dims))
        s = _seq_sum(x, dl, rnd)
        if name == "mean":
            n = 1
            for d in dl:
                n *= x.shape[d % max(x.dim(), 1)] if x.dim() else 1
            s = rnd(s / max(n, 1))
        if keepdim:
            for d in sorted(d % max(x.dim(), 1) for d in dl):
                s = s.unsqueeze(d)
        return s
    if name in ("mm", "bmm"):
        return _seq_mm(a[0], a[1], rnd)
    if name == "mv":
        return _seq_mm(a[0], a[1].unsqueeze(-1), rnd).squeeze(-1)
    if name == "dot":
        return _seq_mm(a[0].unsqueeze(0), a[1].unsqueeze(-1), rnd).reshape(())
    if name == "addmm":
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        prod = _seq_mm(a[1], a[2], rnd)
        if alpha != 1:
            prod = rnd(prod * alpha)
        bias = a[0] if beta == 1 else rnd(a[0] * beta)
        return rnd(bias + prod)
    return None


@monitor(ContractRound)
def _contract_round(ctx: JobContext, spec: ContractRound, report: ContractRoundReport) -> Any:
    """The contract oracle's dispatch mode (module doc)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    cdt = getattr(torch, spec.compute)
    lowp_acc = spec.accumulate != "float32" and spec.accumulate == spec.compute
    kept: dict[str, int] = {}
    rounded: dict[str, int] = {}
    accumulated: dict[str, int] = {}

    def rnd(t: torch.Tensor) -> torch.Tensor:
        return t.to(cdt).to(t.dtype) if t.dtype != cdt else t

    def rnd_any(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != cdt:
            return rnd(t)
        return t

    class _Round(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = dict(kwargs or {})
            name = str(func.overloadpacket.__name__)
            dt = kwargs.get("dtype")
            if dt in _NARROW_FLOATS:
                src = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if src is None or src.dtype == torch.float64:
                    kwargs["dtype"] = torch.float64
                    kept[name] = kept.get(name, 0) + 1
            returns = func._schema.returns
            aliased = any(r.alias_info is not None for r in returns)
            if lowp_acc and not aliased and name in ACCUMULATING:
                with torch.no_grad():
                    out = _accumulate(name, args, kwargs, rnd)
                if out is not None:
                    accumulated[name] = accumulated.get(name, 0) + 1
                    return out
            out = func(*args, **kwargs)
            if aliased:
                if any(r.alias_info is not None and r.alias_info.is_write for r in returns):
                    with torch.no_grad():
                        for t in (out if isinstance(out, tuple | list) else (out,)):
                            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != cdt:
                                t.copy_(rnd(t))
                    rounded[name] = rounded.get(name, 0) + 1
                return out
            with torch.no_grad():
                res = tree_map(rnd_any, out)
            rounded[name] = rounded.get(name, 0) + 1
            return res

    @contextmanager
    def cm() -> Any:
        with _Round():
            try:
                yield
            finally:
                report.compute = spec.compute
                report.accumulate = spec.accumulate
                report.rounded = dict(rounded)
                report.accumulated = dict(accumulated)
                report.kept = dict(kept)

    return cm()
