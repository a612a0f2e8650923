"""Reference row sum in plain PyTorch."""

import torch


def rowsum(x: torch.Tensor) -> torch.Tensor:
    """Return ``x.sum(-1)`` in ``x.dtype`` (accumulated in promote_types(x.dtype, float32))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return x.to(acc).sum(-1).to(x.dtype)
