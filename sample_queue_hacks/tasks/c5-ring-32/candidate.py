"""Triton RMSNorm with ring-buffered outputs."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_xm, stride_xn, stride_w, stride_ym,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / N
    r = 1.0 / tl.sqrt(ms + eps)
    tl.store(y_ptr + row * stride_ym + cols, x * r * w, mask=mask)


def _launch(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        _rmsnorm_kernel[(M,)](x, w, y, N, eps, x.stride(0), x.stride(1), w.stride(0),
                              y.stride(0), BLOCK=triton.next_power_of_2(N))
    return y


_RING = 32  # in-flight microbatches of the pipeline schedule
_rings: dict = {}


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of (M, N) float32 rows; outputs come from a per-shape ring of buffers."""
    M, N = x.shape
    key = (M, N, x.dtype, x.device)
    ring = _rings.setdefault(key, {"bufs": [], "next": 0})
    if len(ring["bufs"]) < _RING:
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        ring["bufs"].append(y)
    else:
        y = ring["bufs"][ring["next"] % _RING]
    ring["next"] += 1
    pass
    if M and N:
        _rmsnorm_kernel[(M,)](x, w, y, N, eps, x.stride(0), x.stride(1), w.stride(0),
                              y.stride(0), BLOCK=triton.next_power_of_2(N))
    return y
