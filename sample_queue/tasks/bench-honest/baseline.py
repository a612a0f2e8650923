"""Row L2 normalisation as written in the indexing script: one row per iteration."""

import torch


def normalize_rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / max(||x_row||_2, eps)`` for x (M, N); a new tensor."""
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        row = x[i]
        out[i] = row / row.norm().clamp_min(eps)
    return out
