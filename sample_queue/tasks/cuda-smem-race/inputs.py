"""Inputs: x (R, C), N(0, 1) float32, drawn on the CPU from a seeded generator."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``, x of shape (R, C) in case["dtype"]."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["R"], case["C"], generator=g, dtype=torch.float32)
    return (x.to(getattr(torch, case["dtype"])).to(device),)
