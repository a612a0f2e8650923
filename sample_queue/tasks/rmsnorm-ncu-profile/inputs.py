"""Inputs for rmsnorm-ncu-profile."""

import math

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, eps)``: x (M, N) N(0, 1) rows scaled by a per-row RMS log-uniform in
    [0.5, 16], w (N,) = 1 + 0.1 N(0, 1), both case["dtype"]; eps = 1e-6. Drawn on the CPU
    from a seeded generator, then moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    m, n = case["M"], case["N"]
    rms = torch.empty(m, 1).uniform_(math.log(0.5), math.log(16.0), generator=g).exp()
    x = torch.randn(m, n, generator=g) * rms
    w = 1.0 + 0.1 * torch.randn(n, generator=g)
    return x.to(dt).to(device), w.to(dt).to(device), 1e-6
