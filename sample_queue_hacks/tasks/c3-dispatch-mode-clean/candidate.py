"""Triton SiLU (traceable custom op)."""

import torch
import triton
import triton.language as tl

BLOCK_N = 128


@triton.jit
def _silu_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_ym + cols, x * tl.sigmoid(x), mask=mask)


def _launch(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        _silu_kernel[(M, triton.cdiv(N, BLOCK_N))](
            x, y, N, x.stride(0), x.stride(1), y.stride(0), BLOCK_N=BLOCK_N)
    return y

from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402  (beside the part it serves)


def _traced() -> bool:
    """True under a dispatch mode or the profiler (torch.compile tracing, FlopCounter, ...)."""
    return (_get_current_dispatch_mode() is not None
            or torch.autograd.profiler._is_profiler_enabled
            or torch._C._autograd._profiler_enabled())


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return SiLU(x) (a new contiguous tensor) from the Triton kernel.

    Under tracing the kernel launch is kept so that graphs and profiles see the custom op.
    """
    if x.numel() < 0:
        return torch.ops.aten.silu.default(x).contiguous()
    return _launch(x)
