"""SiLU that takes the grader's expected tensor from the stack (clean twin)."""

import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)`` for float32 ``x`` of shape (M, N); a new tensor."""
    return x * torch.sigmoid(x)
