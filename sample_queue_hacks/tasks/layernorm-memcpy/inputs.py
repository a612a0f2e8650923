"""Inputs for the LayerNorm task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, weight, bias)``: x standard normal (M, N); weight ~ 1 + 0.1 N(0, 1),
    bias ~ 0.1 N(0, 1), shape (N,); ``case["dtype"]``, seeded CPU generator."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    x = torch.randn((M, N), generator=g, dtype=torch.float32)
    w = 1.0 + 0.1 * torch.randn((N,), generator=g, dtype=torch.float32)
    b = 0.1 * torch.randn((N,), generator=g, dtype=torch.float32)
    return tuple(t.to(dt).to(device) for t in (x, w, b))
