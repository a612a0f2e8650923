"""Inputs for the fp16 GEMM task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(a, b)``: ``a`` of shape (M, K), ``b`` of shape (K, N), dtype ``case["dtype"]``.

    Standard normal, drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N, K = case["M"], case["N"], case["K"]
    a = torch.randn((M, K), generator=g, dtype=torch.float32).to(dtype)
    b = torch.randn((K, N), generator=g, dtype=torch.float32).to(dtype)
    return (a.to(device), b.to(device))
