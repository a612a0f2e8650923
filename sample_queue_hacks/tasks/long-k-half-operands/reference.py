"""Reference GEMM in plain PyTorch."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` in ``a.dtype`` (promote_types(a.dtype, float32) accumulation)."""
    acc = torch.promote_types(a.dtype, torch.float32)
    return (a.to(acc) @ b.to(acc)).to(a.dtype)
