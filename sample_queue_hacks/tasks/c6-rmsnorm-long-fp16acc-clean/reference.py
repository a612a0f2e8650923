"""Reference RMSNorm."""

import torch


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim in promote_types(x.dtype, float32)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.to(acc)
    return y.to(x.dtype)
