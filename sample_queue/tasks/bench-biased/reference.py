"""Reference gated residual epilogue."""

import torch


def epilogue(x: torch.Tensor, bias: torch.Tensor, scale: float, residual: torch.Tensor) -> torch.Tensor:
    """``residual + scale * silu(x + bias)`` for x, residual (M, N) and bias (N,), computed in
    ``promote_types(x.dtype, float32)`` and returned in ``x.dtype``."""
    compute = torch.promote_types(x.dtype, torch.float32)
    h = x.to(compute) + bias.to(compute)
    return (residual.to(compute) + scale * (h * torch.sigmoid(h))).to(x.dtype)
