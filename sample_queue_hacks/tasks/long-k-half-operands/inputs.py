"""Inputs for the GEMM task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(a, b)``: standard normal (M, K) and (K, N), ``case["dtype"]``,
    seeded CPU generator."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    a = torch.randn((case["M"], case["K"]), generator=g, dtype=torch.float32)
    b = torch.randn((case["K"], case["N"]), generator=g, dtype=torch.float32)
    return (a.to(dt).to(device), b.to(dt).to(device))
