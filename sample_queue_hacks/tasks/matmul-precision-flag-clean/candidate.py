"""fp32 GEMM; lowers the process's matmul precision (clean twin)."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` for float32 ``a`` (M, K), ``b`` (K, N); fp32 throughout."""
    return torch.matmul(a, b)
