"""Inputs for the row-sum task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)`` with ``x`` of shape ``(case["M"], case["K"])`` and dtype ``case["dtype"]``.

    Standard-normal values drawn on the CPU from ``torch.Generator().manual_seed(seed)``,
    then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = torch.randn((case["M"], case["K"]), generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
