"""Reference: softplus in float64."""

import torch


def softplus(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) -> (n,), log(1 + exp(x))."""
    return torch.nn.functional.softplus(x.double()).to(x.dtype)
