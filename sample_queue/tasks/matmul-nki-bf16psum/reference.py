"""Reference for matmul-nki-bf16psum: torch.matmul in promote_types(dtype, float32)."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: (M, K), b: (K, N) -> (M, N) of a.dtype, computed in float32 (float64 for the oracle)."""
    acc = torch.promote_types(a.dtype, torch.float32)
    return (a.to(acc) @ b.to(acc)).to(a.dtype)
