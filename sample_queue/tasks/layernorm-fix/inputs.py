"""Inputs for layernorm-fix."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, b, eps)``.

    x: (M, N) in case["dtype"], 0.5 + 2 * N(0, 1) (non-zero mean, so the centring matters);
    w: (N,) 1 + 0.1 * N(0, 1); b: (N,) 0.1 * N(0, 1); eps: 1e-5 (Python float).
    Drawn on the CPU from a seeded generator, then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    x = 0.5 + 2.0 * torch.randn(M, N, generator=g)
    w = 1.0 + 0.1 * torch.randn(N, generator=g)
    b = 0.1 * torch.randn(N, generator=g)
    return (x.to(dtype).to(device), w.to(dtype).to(device), b.to(dtype).to(device), 1e-5)
