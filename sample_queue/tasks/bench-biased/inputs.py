"""Inputs for the gated residual epilogue."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, bias, scale, residual)``.

    x, residual: (M, N), N(0, 1); bias: (N,), 0.1 * N(0, 1); all in ``case["dtype"]``.
    scale: 0.5. Drawn on the CPU from a generator seeded with ``seed``, then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    m, n = case["M"], case["N"]
    x = torch.randn(m, n, generator=gen)
    bias = 0.1 * torch.randn(n, generator=gen)
    residual = torch.randn(m, n, generator=gen)
    return x.to(dtype).to(device), bias.to(dtype).to(device), 0.5, residual.to(dtype).to(device)
