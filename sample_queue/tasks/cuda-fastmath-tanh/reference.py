"""Reference: GELU, tanh approximation (torch's approximate="tanh")."""

import torch


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) float32 -> (n,) float32."""
    return torch.nn.functional.gelu(x.double(), approximate="tanh").to(x.dtype)
