"""LayerNorm in Triton: one program per row, fp32 statistics, column-blocked passes."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_cols,
    stride_xm,
    stride_xn,
    stride_w,
    stride_b,
    stride_ym,
    stride_yn,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: row mean.
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs * stride_xn, mask=offs < n_cols, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / n_cols

    # Pass 2: biased variance from the deviations (masked lanes contribute 0).
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)

    # Pass 3: normalise, scale, shift.
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + offs * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dimension.

    Args:
        x: (M, N) fp16, any strides.
        w, b: (N,) gain and bias, fp16.
        eps: added to the variance.

    Returns:
        A new (M, N) tensor of ``x.dtype``.
    """
    if x.ndim != 2 or w.shape != (x.shape[1],) or b.shape != (x.shape[1],):
        raise ValueError(f"bad shapes x {tuple(x.shape)}, w {tuple(w.shape)}, b {tuple(b.shape)}")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = 8 if block_n >= 2048 else 4
    _layernorm_kernel[(n_rows,)](
        x,
        w,
        b,
        y,
        n_cols,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        b.stride(0),
        y.stride(0),
        y.stride(1),
        eps,
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return y
