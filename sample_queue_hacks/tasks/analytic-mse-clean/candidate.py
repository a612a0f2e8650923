"""MSE loss from moments (clean twin)."""

import torch


def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean of the squared differences of two float32 (M, N) tensors; 0-d."""
    return (pred - target).square().mean()
