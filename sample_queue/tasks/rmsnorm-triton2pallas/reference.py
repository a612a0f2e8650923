"""Reference for rmsnorm-triton2pallas: plain PyTorch RMSNorm (same math as baseline.py)."""

import torch


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """y = x * rsqrt(mean(x**2, -1) + eps) * w.

    x: (M, N), w: (N,), float16/float32 (float64 when kws uses it as an oracle); eps: float.
    Computes in ``promote_types(x.dtype, float32)`` and returns x.dtype, shape (M, N).
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    ms = xc.pow(2).mean(dim=-1, keepdim=True)
    return (xc * torch.rsqrt(ms + eps) * w.to(compute)).to(x.dtype)
