"""GELU (erf form) for the old toolchain: Triton 2.0, libdevice math, contiguous 1-D view."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.libdevice.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y, mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    _gelu_kernel[grid](x, y, n, BLOCK_SIZE=1024)
    return y
