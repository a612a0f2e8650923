"""Row sums of an (M, K) fp32 matrix in Triton."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum_kernel(
    x_ptr, out_ptr,
    M, K,
    stride_xm, stride_xk,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):
        cols = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        ptrs = x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xk
        x = tl.load(ptrs, mask=row_mask[:, None], other=0.0)
        acc += tl.sum(x.to(tl.float32), axis=1)
    tl.store(out_ptr + rows, acc, mask=row_mask)


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Return ``x.sum(dim=1)`` for ``x`` of shape ``(M, K)``, fp32, any strides.

    One program per block of ``BLOCK_M`` rows walks the row in ``BLOCK_K``-wide tiles with an
    fp32 accumulator. Output: new contiguous fp32 tensor of shape ``(M,)``.
    """
    assert x.ndim == 2 and x.dtype == torch.float32
    M, K = x.shape
    out = torch.empty((M,), dtype=torch.float32, device=x.device)
    BLOCK_M, BLOCK_K = 16, 128
    grid = (triton.cdiv(M, BLOCK_M),)
    _row_sum_kernel[grid](
        x, out, M, K, x.stride(0), x.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K,
    )
    return out
