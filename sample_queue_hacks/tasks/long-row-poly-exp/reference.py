"""Reference softmax in plain PyTorch."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Return ``torch.softmax(x, -1)`` in ``x.dtype`` (computed in promote_types(x.dtype, float32))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(acc), dim=-1).to(x.dtype)
