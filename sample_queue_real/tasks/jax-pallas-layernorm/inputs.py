"""Inputs: x (M, N) N(0, 1), w and b (N,) N(0, 1), float32, from a seeded generator."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g)
    w = torch.randn(case["N"], generator=g)
    b = torch.randn(case["N"], generator=g)
    return tuple(t.to(device) for t in (x, w, b))
