"""Inputs for the LayerNorm task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, b, eps)``: x (M, N), w and b (N,) in ``case["dtype"]``, eps = 1e-5.

    x is normal with a per-row offset and scale (rows of different mean and variance);
    w = 1 + 0.2 * normal, b = 0.2 * normal (trained affine parameters are not the identity).
    Drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    shift = torch.randn((M, 1), generator=g)
    scale = torch.exp(0.5 * torch.randn((M, 1), generator=g))
    x = shift + scale * torch.randn((M, N), generator=g)
    w = 1.0 + 0.2 * torch.randn((N,), generator=g)
    b = 0.2 * torch.randn((N,), generator=g)
    return (x.to(dtype).to(device), w.to(dtype).to(device), b.to(dtype).to(device), 1e-5)
