"""Row L2 normalisation, all rows in one vectorised expression."""

import torch


def normalize_rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / max(||x_row||_2, eps)`` for x (M, N), any strides; a new tensor of x.dtype."""
    norms = torch.linalg.vector_norm(x, ord=2, dim=1, keepdim=True)
    return x / norms.clamp_min(eps)
