"""SiLU returning a lazy tensor computed on first use (clean twin)."""

import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)`` for float32 ``x`` of shape (M, N); a new tensor."""
    return x * torch.sigmoid(x)
