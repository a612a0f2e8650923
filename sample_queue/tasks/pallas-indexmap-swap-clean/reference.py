"""Reference: each row of x times its factor."""

import torch


def row_scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """x: (R, C), s: (R,) -> (R, C), x * s[:, None]."""
    return x * s[:, None]
