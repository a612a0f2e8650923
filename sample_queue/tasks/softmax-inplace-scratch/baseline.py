"""Existing tiled row softmax: max pass, exp-sum pass, normalise pass (exp recomputed)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(
    x_ptr, out_ptr, N,
    stride_xm, stride_xn, stride_om,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    o_row = out_ptr + row * stride_om
    offs = tl.arange(0, BLOCK_N)
    m = tl.full((BLOCK_N,), -float("inf"), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros((BLOCK_N,), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"))
        s += tl.exp(x - row_max)
    inv = 1.0 / tl.sum(s, axis=0)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"))
        tl.store(o_row + cols, tl.exp(x - row_max) * inv, mask=cols < N)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of fp32 ``x`` (M, N), any strides; one program per row."""
    assert x.ndim == 2 and x.dtype == torch.float32
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), out.stride(0), BLOCK_N=1024)
    return out
