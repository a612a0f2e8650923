"""Inputs for the SiLU task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: standard normal times 2, shape (M, N), drawn on the CPU."""
    g = torch.Generator().manual_seed(seed)
    x = 2.0 * torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (x.to(getattr(torch, case["dtype"])).to(device),)
