"""Inputs for the softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: standard normal logits, shape (M, N), ``case["dtype"]``, drawn on
    the CPU from ``torch.Generator().manual_seed(seed)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (x.to(getattr(torch, case["dtype"])).to(device),)
