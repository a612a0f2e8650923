"""Inputs for the per-row scaling task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, s)``: ``x`` of shape ``(M, N)`` in ``case["dtype"]``, ``s`` of shape ``(M,)`` fp32.

    ``x`` is standard normal; ``s`` is positive, log-uniform in [1/8, 8] like per-token
    quantisation scales. Drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    x = torch.randn((M, N), generator=g, dtype=torch.float32).to(dtype)
    s = torch.exp2(torch.empty((M,), dtype=torch.float32).uniform_(-3.0, 3.0, generator=g))
    return (x.to(device), s.to(device))
