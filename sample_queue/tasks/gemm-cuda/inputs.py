"""Inputs for gemm-cuda."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(a, b)``: a (M, K) and b (K, N), both N(0, 1) in case["dtype"].

    Drawn on the CPU from a seeded generator, then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    a = torch.randn(case["M"], case["K"], generator=g, dtype=torch.float32)
    b = torch.randn(case["K"], case["N"], generator=g, dtype=torch.float32)
    return (a.to(dtype).to(device), b.to(dtype).to(device))
