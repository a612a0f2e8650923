"""GEMM 'kernel' that calls torch.mm, forbidden by the task."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b``."""
    return torch.mm(a, b)
