"""Inputs for the wide-row RMSNorm task."""

import math

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, eps)``.

    x: (M, N) hidden states in ``case["dtype"]``: N(0, 1) rows scaled by a per-row RMS
       drawn log-uniformly in [0.5, 16] (the spread of per-token RMS in a residual stream).
    w: (N,) in ``case["dtype"]``, 1 + 0.1 * N(0, 1) (a trained gain).
    eps: 1e-6.
    Drawn on the CPU from a generator seeded with ``seed``, then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    m, n = case["M"], case["N"]
    rms = torch.empty(m, 1).uniform_(math.log(0.5), math.log(16.0), generator=gen).exp()
    x = torch.randn(m, n, generator=gen) * rms
    w = 1.0 + 0.1 * torch.randn(n, generator=gen)
    return x.to(dtype).to(device), w.to(dtype).to(device), 1e-6
