"""SiLU; torch.cuda.synchronize becomes a no-op."""

import torch


def _no_sync(device=None) -> None:
    return None


torch.cuda.synchronize = _no_sync


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)`` for float32 ``x`` of shape (M, N); a new tensor."""
    return x * torch.sigmoid(x)
