"""Inputs for the split-K GEMM task."""

import math

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(a, b)`` in ``case["dtype"]``: a (M, K) N(0, 1); b (K, N) N(0, 1/K), so the
    entries of ``a @ b`` are of order 1. Drawn on the CPU from a generator seeded with
    ``seed``, then moved to ``device``."""
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    m, n, k = case["M"], case["N"], case["K"]
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen) / math.sqrt(k)
    return a.to(dtype).to(device), b.to(dtype).to(device)
