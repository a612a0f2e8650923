"""LayerNorm that ignores weight and bias."""

import torch


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm of ``x`` (M, N) over N, eps 1e-5 (affine parameters: identity at init)."""
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).square().mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5)
