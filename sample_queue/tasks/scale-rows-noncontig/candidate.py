"""Per-row scaling out[i, j] = x[i, j] * s[i] in Triton, without copying strided inputs."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_rows_kernel(
    x_ptr, s_ptr, out_ptr,
    M, N,
    stride_m, stride_n, stride_s,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * stride_m + cols[None, :] * stride_n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + rows * stride_s, mask=rows < M, other=0.0).to(tl.float32)
    y = x * s[:, None]
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def scale_rows(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Return ``x * s[:, None]`` as a new contiguous tensor of ``x``'s shape and dtype.

    ``x``: (M, N) fp32 or fp16, any strides; ``s``: (M,) fp32, any stride. The product is
    formed in fp32 and rounded once. 2-D grid of BLOCK_M x BLOCK_N tiles.
    """
    assert x.ndim == 2 and s.ndim == 1 and s.shape[0] == x.shape[0]
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_M, BLOCK_N = 16, 256
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _scale_rows_kernel[grid](
        x, s, out, M, N,
        out.stride(0), out.stride(1), s.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )
    return out
