"""Reference: the Euclidean norm of each row, accumulated in float64."""

import torch


def row_norm(x: torch.Tensor) -> torch.Tensor:
    """x: (R, C) float32 -> (R,) float32, sqrt(sum_j x[i, j]^2)."""
    return torch.linalg.vector_norm(x.double(), dim=1).to(x.dtype)
