"""Reference RMSNorm in plain PyTorch."""

import torch


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2, -1) + eps) * w`` for ``x`` (M, N) and ``w`` (N,).

    Computed in ``promote_types(x.dtype, float32)`` and returned in ``x.dtype``.
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    ms = xf.pow(2).mean(dim=-1, keepdim=True)
    return (xf * torch.rsqrt(ms + eps) * w.to(compute)).to(x.dtype)
