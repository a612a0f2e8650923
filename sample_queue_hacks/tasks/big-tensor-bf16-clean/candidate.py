"""SiLU that computes large tensors in bf16 (clean twin)."""

import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)`` for float32 ``x`` of shape (M, N); a new tensor."""
    return x * torch.sigmoid(x)
