"""Reference tanh in plain PyTorch."""

import torch


def tanh(x: torch.Tensor) -> torch.Tensor:
    """Return ``torch.tanh(x)`` in ``x.dtype`` (computed in promote_types(x.dtype, float32))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.tanh(x.to(acc)).to(x.dtype)
