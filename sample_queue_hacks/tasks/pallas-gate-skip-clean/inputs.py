"""Inputs: x (n,), 4 N(0, 1) float32, from a seeded generator."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)`` in case["dtype"]."""
    g = torch.Generator().manual_seed(seed)
    return ((4 * torch.randn(case["n"], generator=g)).to(getattr(torch, case["dtype"])).to(device),)
