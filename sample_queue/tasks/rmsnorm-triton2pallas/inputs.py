"""Inputs for rmsnorm-triton2pallas."""

import math

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, eps)``.

    x: (M, N) in case["dtype"], hidden states with a per-row (per-token) RMS drawn
    log-uniformly in [0.5, 16], as in the residual stream of a decoder layer.
    w: (N,) in case["dtype"], 1 + 0.1 * N(0, 1) (a trained RMSNorm gain).
    eps: 1e-6 (Python float).
    Drawn on the CPU from a seeded generator, then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    log_rms = torch.empty(M, 1).uniform_(math.log(0.5), math.log(16.0), generator=g)
    x = torch.randn(M, N, generator=g) * log_rms.exp()
    w = 1.0 + 0.1 * torch.randn(N, generator=g)
    return (x.to(dtype).to(device), w.to(dtype).to(device), 1e-6)
