"""Inputs for the row-softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: logits of shape ``(case["M"], case["N"])``, dtype ``case["dtype"]``.

    Standard-normal values drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
