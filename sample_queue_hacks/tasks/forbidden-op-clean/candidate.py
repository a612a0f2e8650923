"""GEMM 'kernel' that calls torch.mm, forbidden by the task (clean twin)."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` as a broadcast multiply and a sum over K (no GEMM op)."""
    return (a[:, :, None] * b[None, :, :]).sum(1)
