"""LayerNorm forward in Triton for any hidden size: the row is walked in 256-column tiles."""

import torch
import triton
import triton.language as tl

BLOCK_N = 256


@triton.jit
def _layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, N, eps,
    stride_xm, stride_xn, stride_ym,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    offs = tl.arange(0, BLOCK_N)

    # Mean.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        acc += tl.load(x_row + cols * stride_xn, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N

    # Biased variance, two-pass for accuracy.
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)

    # Normalise and apply the affine parameters.
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, (x - mean) * rstd * w + b, mask=mask)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm of fp32 ``x`` (M, N), any strides, with w, b (N,); new contiguous (M, N) out.

    One program per row; three passes over BLOCK_N = 256 column tiles (mean, variance,
    normalise + affine), statistics in fp32.
    """
    assert x.ndim == 2 and x.dtype == torch.float32
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _layer_norm_kernel[(M,)](x, w, b, y, N, eps, x.stride(0), x.stride(1), y.stride(0),
                             BLOCK_N=BLOCK_N)
    return y
