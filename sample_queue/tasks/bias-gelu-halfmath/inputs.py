"""Inputs for bias-gelu-halfmath."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, bias)``: x (M, N) = 1.5 * N(0, 1), bias (N,) = 0.5 * N(0, 1), case["dtype"].

    The pre-activation spread covers the GELU's negative dip (minimum near z = -0.75),
    its near-linear positive side and tails out to |z| ~ 7.
    Drawn on the CPU from a seeded generator, then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 1.5 * torch.randn(case["M"], case["N"], generator=g)
    bias = 0.5 * torch.randn(case["N"], generator=g)
    return (x.to(dtype).to(device), bias.to(dtype).to(device))
