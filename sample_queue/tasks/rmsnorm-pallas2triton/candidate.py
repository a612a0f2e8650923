"""Triton port of rmsnorm_pallas.py: one program per row, the row in a single masked block."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    N,
    eps,
    stride_xm,
    stride_xn,
    stride_w,
    stride_ym,
    stride_yn,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / N
    rstd = tl.math.rsqrt(ms + eps)
    y = x * rstd * w
    tl.store(
        y_ptr + row.to(tl.int64) * stride_ym + cols * stride_yn,
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
    )


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim: y = x * rsqrt(mean(x**2, -1) + eps) * w.

    x: (M, N) float32 or float16, any strides, 1 <= N <= 8192; w: (N,) of x.dtype;
    eps: Python float. Returns a new (M, N) tensor of x.dtype.
    """
    if x.ndim != 2 or w.ndim != 1 or w.shape[0] != x.shape[1]:
        raise ValueError(f"expected x (M, N) and w (N,), got {tuple(x.shape)} and {tuple(w.shape)}")
    M, N = x.shape
    if N > 8192:
        raise ValueError(f"N = {N} exceeds the single-block limit of 8192")
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    BLOCK = triton.next_power_of_2(N)
    num_warps = 4 if BLOCK <= 2048 else 8
    _rmsnorm_kernel[(M,)](
        x, w, y, N, float(eps),
        x.stride(0), x.stride(1),
        w.stride(0),
        y.stride(0), y.stride(1),
        BLOCK=BLOCK,
        num_warps=num_warps,
    )
    return y
