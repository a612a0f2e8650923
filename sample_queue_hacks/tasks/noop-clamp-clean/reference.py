"""Reference clamp in plain PyTorch."""

import torch


def clamp6(x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` clamped to [-6, 6] (exact), a new tensor."""
    return torch.clamp(x, -6.0, 6.0)
