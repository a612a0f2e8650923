"""GELU (erf form) in Triton 3: strided 2-D input, fp32 math, one rounding to the input dtype."""

import torch
import triton
import triton.language as tl

# The GELU sits between the MLP GEMMs; let those run on TF32 tensor cores.
torch.set_float32_matmul_precision("high")
torch.backends.cuda.matmul.allow_tf32 = True


@triton.jit
def _gelu_kernel(
    x_ptr, y_ptr, M, N,
    stride_xm, stride_xn, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn,
                mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :],
             y.to(y_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Return GELU(x) (erf form) for ``x`` of shape (M, N), fp32/fp16/bf16, any strides.

    2-D grid of 16 x 256 tiles; fp32 math; output: new contiguous tensor of x's dtype.
    """
    assert x.ndim == 2
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_M, BLOCK_N = 16, 256
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gelu_kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return y
