"""RMSNorm in Triton for wide rows: one program per row, two passes over column blocks."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    n_cols,
    stride_xm,
    stride_xn,
    stride_w,
    stride_ym,
    stride_yn,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: sum of squares, accumulated lane-wise over the column blocks.
    acc = tl.zeros([BLOCK_N], dtype=x_ptr.dtype.element_ty)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs * stride_xn, mask=offs < n_cols, other=0.0)
        acc += x * x
    mean_sq = tl.sum(acc, axis=0) / n_cols
    rstd = tl.rsqrt(mean_sq.to(tl.float32) + eps)

    # Pass 2: normalise and apply the gain.
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd * w
        tl.store(y_row + offs * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension.

    Args:
        x: (M, N) float16, bfloat16 or float32, any strides.
        w: (N,) gain, same dtype as ``x``.
        eps: added to the mean square before the reciprocal square root.

    Returns:
        A new (M, N) tensor of ``x.dtype``.
    """
    if x.ndim != 2 or w.shape != (x.shape[1],):
        raise ValueError(f"expected x (M, N) and w (N,), got {tuple(x.shape)} and {tuple(w.shape)}")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = 8 if block_n >= 2048 else 4
    _rmsnorm_kernel[(n_rows,)](
        x,
        w,
        y,
        n_cols,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        y.stride(0),
        y.stride(1),
        eps,
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return y
