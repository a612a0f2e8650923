"""RMSNorm in Triton: one program per row, the whole row in registers, fp32 accumulation."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_cols, stride_xm, stride_xn, stride_w, stride_ym, stride_yn, eps,
                  BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_ym + cols * stride_yn, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim of x (M, N), N <= 8192, any strides; w (N,). Returns a new
    (M, N) tensor of x.dtype."""
    if x.ndim != 2 or w.shape != (x.shape[1],):
        raise ValueError(f"expected x (M, N) and w (N,), got {tuple(x.shape)} and {tuple(w.shape)}")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m == 0 or n == 0:
        return y
    block = triton.next_power_of_2(n)
    _rmsnorm_rows[(m,)](x, w, y, n, x.stride(0), x.stride(1), w.stride(0), y.stride(0), y.stride(1), eps,
                        BLOCK_N=block, num_warps=8 if block >= 2048 else 4)
    return y
