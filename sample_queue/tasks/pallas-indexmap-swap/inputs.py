"""Inputs: x (R, C) and s (R,), N(0, 1) float32, from a seeded generator."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, s)`` in case["dtype"]."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["R"], case["C"], generator=g)
    s = torch.randn(case["R"], generator=g)
    return x.to(dt).to(device), s.to(dt).to(device)
