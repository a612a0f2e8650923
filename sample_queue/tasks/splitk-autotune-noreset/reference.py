"""Reference GEMM in plain PyTorch."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a (M, K) and b (K, N), computed in ``promote_types(a.dtype, float32)``
    and returned in ``a.dtype``."""
    compute = torch.promote_types(a.dtype, torch.float32)
    return torch.matmul(a.to(compute), b.to(compute)).to(a.dtype)
