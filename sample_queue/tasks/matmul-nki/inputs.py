"""Inputs for matmul-nki."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """(a, b): a (M, K) and b (K, N) in case["dtype"], N(0, 1) / sqrt(K) so |C| ~ 1."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    M, N, K = case["M"], case["N"], case["K"]
    a = torch.randn(M, K, generator=g) / K ** 0.5
    b = torch.randn(K, N, generator=g)
    return a.to(dt).to(device), b.to(dt).to(device)
