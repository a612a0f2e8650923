"""Inputs for the cast-copy task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: a 1-D contiguous tensor of ``case["n"]`` values, dtype ``case["dtype"]``.

    Standard normal scaled by 4 (parameter-like magnitudes, spanning many fp16 exponents),
    drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 4.0 * torch.randn((case["n"],), generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
