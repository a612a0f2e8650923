"""Inputs for layernorm-trace-claim."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, b, eps)``: x (M, N) = 3 + 2 N(0, 1) (an offset mean, so centring
    matters), w (N,) = 1 + 0.1 N(0, 1), b (N,) = 0.1 N(0, 1), all case["dtype"]; eps = 1e-5.
    Drawn on the CPU from a seeded generator, then moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    m, n = case["M"], case["N"]
    x = 3.0 + 2.0 * torch.randn(m, n, generator=g)
    w = 1.0 + 0.1 * torch.randn(n, generator=g)
    b = 0.1 * torch.randn(n, generator=g)
    return x.to(dt).to(device), w.to(dt).to(device), b.to(dt).to(device), 1e-5
