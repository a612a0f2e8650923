"""Inputs for the tiled row-softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: logits of shape ``(case["M"], case["N"])``, dtype ``case["dtype"]``.

    Standard normal scaled by 3 (logit-like spread), drawn on the CPU from
    ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 3.0 * torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
