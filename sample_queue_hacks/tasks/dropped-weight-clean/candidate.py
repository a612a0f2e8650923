"""LayerNorm that ignores weight and bias (clean twin)."""

import torch


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm of float32 ``x`` (M, N) over N with ``weight``, ``bias`` (N,), eps 1e-5."""
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).square().mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5) * weight + bias
