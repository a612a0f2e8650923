"""Inputs for the row L2-normalisation task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, eps)``: x (M, N) embeddings, N(0, 1), in ``case["dtype"]``; eps = 1e-12.

    Drawn on the CPU from a generator seeded with ``seed``, then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = torch.randn(case["M"], case["N"], generator=gen)
    return x.to(dtype).to(device), 1e-12
