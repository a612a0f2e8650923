"""Reference bias gradient in plain PyTorch."""

import torch


def bias_grad(dy: torch.Tensor) -> torch.Tensor:
    """Return ``dy.sum(dim=0)`` for ``dy`` of shape (T, N), in ``dy.dtype``.

    Accumulates in ``promote_types(dy.dtype, float32)``.
    """
    acc = torch.promote_types(dy.dtype, torch.float32)
    return dy.to(acc).sum(dim=0).to(dy.dtype)
