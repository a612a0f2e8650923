"""fp32 -> fp16 cast-copy in Triton (port of cast_copy.cu)."""

import torch
import triton
import triton.language as tl

VEC = 8  # fp16 elements per 16-byte store, as in the CUDA kernel


@triton.jit
def _cast_copy_kernel(x_ptr, y_ptr, n, n_store, BLOCK: tl.constexpr, VEC: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, VEC), VEC)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x.to(tl.float16), mask=offs < n_store)


def cast_copy(x: torch.Tensor) -> torch.Tensor:
    """Return ``x.to(torch.float16)`` for a 1-D contiguous fp32 tensor of n elements.

    Output: new contiguous fp16 tensor of n elements. One program per BLOCK = 1024 elements.
    The store extent is a whole number of 8-element (16-byte) vectors, so the masked store
    splits into full vector stores instead of the CUDA kernel's separate scalar tail.
    """
    assert x.ndim == 1 and x.is_contiguous() and x.dtype == torch.float32
    n = x.numel()
    y = torch.empty((n,), dtype=torch.float16, device=x.device)
    n_store = triton.cdiv(n, VEC) * VEC
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    _cast_copy_kernel[grid](x, y, n, n_store, BLOCK=BLOCK, VEC=VEC)
    return y
