"""Reference RMSNorm in plain PyTorch."""

import torch


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2, -1) + eps) * w`` for x (M, N), w (N,): computed in
    promote_types(x.dtype, float32), returned in x.dtype."""
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.to(compute)).to(x.dtype)
