"""Inputs for the softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)`` with x ~ 2 N(0, 1) of shape (M, N), drawn on the CPU."""
    g = torch.Generator().manual_seed(seed)
    x = 2.0 * torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    return (x.to(getattr(torch, case["dtype"])).to(device),)
