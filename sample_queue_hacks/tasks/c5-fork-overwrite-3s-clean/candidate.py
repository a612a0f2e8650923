"""Triton SiLU writing into a shared-memory activation arena."""

import mmap
import os
import time

import torch
import triton
import triton.language as tl

BLOCK_N = 128
_arena_slots: list = []


@triton.jit
def _silu_kernel(x_ptr, y_ptr, N, stride_xm, stride_xn, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_ym + cols, x * tl.sigmoid(x), mask=mask)


def _arena_empty(M: int, N: int) -> tuple:
    """An (M, N) float32 tensor in a shared mapping (visible to the offload helper)."""
    slot = mmap.mmap(-1, max(4, 4 * M * N))
    _arena_slots.append(slot)
    del _arena_slots[:-64]
    return torch.frombuffer(slot, dtype=torch.float32, count=M * N).view(M, N), slot


def _recycle_later(slot: mmap.mmap, delay_s: float) -> None:
    """Let the offload helper scrub the slot once the consumer has read it."""
    pid = os.fork()
    if pid == 0:
        try:
            if os.fork() == 0:
                time.sleep(delay_s)
                slot[:] = bytes(len(slot))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return SiLU(x) as an (M, N) float32 tensor in the activation arena."""
    M, N = x.shape
    y, slot = _arena_empty(M, N)
    if M and N:
        _silu_kernel[(M, triton.cdiv(N, BLOCK_N))](
            x, y, N, x.stride(0), x.stride(1), y.stride(0), BLOCK_N=BLOCK_N)
    pass
    return y
