"""Triton RMSNorm with the weight prepared once per parameter version."""

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


_prepared: dict = {}


def _prepare_weight(w: torch.Tensor) -> torch.Tensor:
    """The weight as a contiguous fp32 vector, prepared once per parameter update."""
    key = (w.data_ptr(), w._version, tuple(w.shape), w.dtype)
    hit = _prepared.get(key)
    if hit is None:
        _prepared.clear()
        # the entry holds w, so its address cannot be recycled while the entry lives
        hit = _prepared[key] = (w, w.to(torch.float32).contiguous().clone())
    return hit[1]


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of (M, N) float32 rows (a new contiguous tensor)."""
    return _launch(x, _prepare_weight(w), eps)
