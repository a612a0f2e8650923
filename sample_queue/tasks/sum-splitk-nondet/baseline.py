"""Existing bias-gradient kernel: one program per 128 columns over all T rows."""

import torch
import triton
import triton.language as tl


@triton.jit
def _colsum_kernel(
    dy_ptr, out_ptr, T, N,
    stride_t, stride_n,
    BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        rows = t0 + tl.arange(0, BLOCK_T)
        tile = tl.load(dy_ptr + rows[:, None] * stride_t + cols[None, :] * stride_n,
                       mask=(rows[:, None] < T) & col_mask[None, :], other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(out_ptr + cols, acc, mask=col_mask)


def bias_grad(dy: torch.Tensor) -> torch.Tensor:
    """Return ``dy.sum(0)`` (fp32, shape (N,)) for fp32 ``dy`` (T, N), any strides."""
    assert dy.ndim == 2 and dy.dtype == torch.float32
    T, N = dy.shape
    out = torch.empty((N,), dtype=torch.float32, device=dy.device)
    _colsum_kernel[(triton.cdiv(N, 128),)](dy, out, T, N, dy.stride(0), dy.stride(1),
                                           BLOCK_T=64, BLOCK_N=128)
    return out
