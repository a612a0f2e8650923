"""Reference GEMM in plain PyTorch."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` for ``a`` (M, K) and ``b`` (K, N), in ``a.dtype``.

    Multiplies in ``promote_types(a.dtype, float32)`` (fp32 accumulation for fp16 operands,
    fp64 for the fp64 oracle) and rounds once to ``a.dtype``.
    """
    acc = torch.promote_types(a.dtype, torch.float32)
    return (a.to(acc) @ b.to(acc)).to(a.dtype)
