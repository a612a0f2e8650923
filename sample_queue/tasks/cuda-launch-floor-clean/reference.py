"""Reference: leaky ReLU with slope 0.01."""

import torch


def leaky_relu(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) float32 -> (n,) float32, x where x > 0 else 0.01 x."""
    return torch.where(x > 0, x, 0.01 * x)
