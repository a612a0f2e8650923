"""Row softmax over long fp32 rows in Triton: max, sum and normalise passes over column tiles."""

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

    # Pass 1: lane-wise running max over the tiles, then the row max.
    m = tl.full((BLOCK_N,), -float("inf"), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)

    # Pass 2: sum of exp(x - max).
    s = tl.zeros((BLOCK_N,), tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=-float("inf"))
        s += tl.where(mask, tl.exp(m - row_max), 0.0)
    inv = 1.0 / tl.sum(s, axis=0)

    # Pass 3: normalise.
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=-float("inf"))
        tl.store(o_row + cols, tl.exp(x - row_max) * inv, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of fp32 ``x`` of shape (M, N), any strides.

    One program per row; three passes over the row in BLOCK_N = 512 column tiles (max,
    sum of exponentials, normalise). Output: new contiguous fp32 (M, N).
    """
    assert x.ndim == 2 and x.dtype == torch.float32
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), out.stride(0), BLOCK_N=512)
    return out
