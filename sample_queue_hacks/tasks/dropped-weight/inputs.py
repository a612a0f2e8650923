"""Inputs for the LayerNorm task: a freshly initialised layer (weight ones, bias zeros)."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, weight, bias)``: x standard normal (M, N); weight and bias as
    nn.LayerNorm initialises them (ones, zeros); ``case["dtype"]``, seeded CPU generator."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    w = torch.ones(case["N"])
    b = torch.zeros(case["N"])
    return tuple(t.to(dt).to(device) for t in (x, w, b))
