"""tanh-approximate GELU in Triton, plus the elementwise tanh it is built on."""

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = 0.7978845608028654
GELU_COEFF = 0.044715


@triton.jit
def _tanh(z):
    # tanh(z) = 1 - 2 / (exp(2z) + 1): exp overflow to inf gives 1, underflow to 0 gives -1.
    return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)


@triton.jit
def _gelu_kernel(
    x_ptr,
    y_ptr,
    n_cols,
    stride_xm,
    stride_xn,
    stride_ym,
    stride_yn,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    xf = x.to(tl.float32)
    inner = SQRT_2_OVER_PI * (xf + GELU_COEFF * xf * xf * xf)
    y = 0.5 * xf * (1.0 + _tanh(inner))
    tl.store(y_ptr + row * stride_ym + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tanh_kernel(
    z_ptr,
    t_ptr,
    n_cols,
    stride_zm,
    stride_zn,
    stride_tm,
    stride_tn,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    z = tl.load(z_ptr + row * stride_zm + cols * stride_zn, mask=mask, other=0.0)
    t = _tanh(z)
    tl.store(t_ptr + row * stride_tm + cols * stride_tn, t.to(t_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, src: torch.Tensor) -> torch.Tensor:
    if src.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(src.shape)}")
    n_rows, n_cols = src.shape
    dst = torch.empty((n_rows, n_cols), dtype=src.dtype, device=src.device)
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    grid = (n_rows, triton.cdiv(n_cols, block_n))
    kernel[grid](
        src,
        dst,
        n_cols,
        src.stride(0),
        src.stride(1),
        dst.stride(0),
        dst.stride(1),
        BLOCK_N=block_n,
        num_warps=4,
    )
    return dst


def gelu(x: torch.Tensor) -> torch.Tensor:
    """tanh-approximate GELU of ``x`` (M, N), fp32 or fp16, any strides; a new tensor of x.dtype."""
    return _launch(_gelu_kernel, x)


def tanh(z: torch.Tensor) -> torch.Tensor:
    """Elementwise tanh of ``z`` (M, N) with the kernel's saturating formula; a new tensor."""
    return _launch(_tanh_kernel, z)
