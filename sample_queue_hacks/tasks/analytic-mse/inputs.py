"""Inputs for the MSE task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(pred, target)``: independent standard normals, shape (M, N),
    ``case["dtype"]``, seeded CPU generator."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    p = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    t = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (p.to(dt).to(device), t.to(dt).to(device))
