"""Inputs for the RMSNorm task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, eps)``: x ~ N(0, 1) (M, N), w ~ 1 + 0.1 N(0, 1) (N,), eps = 1e-6."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    w = 1.0 + 0.1 * torch.randn(case["N"], generator=g, dtype=torch.float32)
    return (x.to(dt).to(device), w.to(dt).to(device), 1e-6)
