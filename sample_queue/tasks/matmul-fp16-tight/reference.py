"""Reference matmul in plain PyTorch."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for ``a`` (M, K) and ``b`` (K, N).

    Computed in ``promote_types(a.dtype, float32)`` (fp32 accumulation for fp16 operands,
    float64 for a float64 oracle) and rounded once to ``a.dtype``.
    """
    compute = torch.promote_types(a.dtype, torch.float32)
    return torch.matmul(a.to(compute), b.to(compute)).to(a.dtype)
