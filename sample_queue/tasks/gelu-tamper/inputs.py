"""Inputs for the GELU task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: pre-activations of shape ``(case["M"], case["N"])`` in ``case["dtype"]``.

    Standard normal times 2 (covers the curved region of GELU and both tails), drawn on the
    CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 2.0 * torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
