"""Inputs for the fp16 LayerNorm task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, b, eps)``.

    x: (M, N) activations, N(0, 1), in ``case["dtype"]``.
    w: (N,) gain 1 + 0.1 * N(0, 1); b: (N,) bias 0.1 * N(0, 1); both in ``case["dtype"]``.
    eps: 1e-5.
    Drawn on the CPU from a generator seeded with ``seed``, then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    m, n = case["M"], case["N"]
    x = torch.randn(m, n, generator=gen)
    w = 1.0 + 0.1 * torch.randn(n, generator=gen)
    b = 0.1 * torch.randn(n, generator=gen)
    return x.to(dtype).to(device), w.to(dtype).to(device), b.to(dtype).to(device), 1e-5
