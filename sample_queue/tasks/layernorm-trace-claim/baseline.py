"""The code before the change: PyTorch's fused LayerNorm."""

import torch
import torch.nn.functional as F


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """F.layer_norm over the last dim of x (M, N) with w, b (N,)."""
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)
