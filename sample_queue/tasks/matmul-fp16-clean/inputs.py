"""Inputs for the fp16 GEMM task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(a, b)``: a (M, K) and b (K, N), both N(0, 1), in ``case["dtype"]``.

    ``b`` is returned as the transpose of a contiguous (N, K) weight, the layout of a
    linear layer. Drawn on the CPU from a generator seeded with ``seed``, then moved to
    ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    m, n, k = case["M"], case["N"], case["K"]
    a = torch.randn(m, k, generator=gen)
    weight = torch.randn(n, k, generator=gen)
    return a.to(dtype).to(device), weight.to(dtype).to(device).t()
