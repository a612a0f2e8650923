"""LayerNorm written out in tensor ops (mean, centred square, rsqrt, scale and shift)."""

import torch


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """(x - mean) * rsqrt(var + eps) * w + b over the last dim of x (M, N), biased
    variance; w, b (N,). Returns a new (M, N) tensor of x.dtype."""
    mean = x.mean(dim=-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dim=-1, keepdim=True)
    return xc * torch.rsqrt(var + eps) * w + b
