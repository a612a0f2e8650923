"""Triton GELU (tanh approximation) (clean twin)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + (1.0 - 2.0 / (tl.exp(2.0 * (0.7978845608028654 * (x + 0.044715 * x * x * x))) + 1.0)))).to(y_ptr.dtype.element_ty), mask=mask)


def _gelu_triton(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _gelu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    return y


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Return GELU(x) (tanh approximation) in x's dtype, for float32 and float16 ``x``."""
    return _gelu_triton(x).view(x.shape)
