"""The existing SiLU: two passes (sigmoid, then the product) and a defensive copy."""

import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)`` for float32 ``x`` (M, N); a new tensor."""
    x = x.contiguous().clone()
    s = torch.sigmoid(x)
    return x * s
