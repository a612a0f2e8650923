"""Reference row sum in plain PyTorch."""

import torch


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum each row of ``x`` (shape ``(M, K)``) and return shape ``(M,)`` in ``x.dtype``.

    Accumulates in ``promote_types(x.dtype, float32)``, so fp64 inputs give an fp64 oracle.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    return x.to(acc).sum(dim=1).to(x.dtype)
