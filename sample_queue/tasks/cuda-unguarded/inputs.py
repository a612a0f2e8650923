"""Inputs: x (R, C) and b (C,), N(0, 1) float32, drawn on the CPU from a seeded generator."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, b)`` in case["dtype"]."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["R"], case["C"], generator=g, dtype=torch.float32)
    b = torch.randn(case["C"], generator=g, dtype=torch.float32)
    return (x.to(dt).to(device), b.to(dt).to(device))
