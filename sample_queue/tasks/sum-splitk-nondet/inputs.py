"""Inputs for the bias-gradient task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(dy,)``: an upstream gradient of shape ``(case["T"], case["N"])``.

    Standard normal in ``case["dtype"]``, drawn on the CPU from
    ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    dy = torch.randn((case["T"], case["N"]), generator=g, dtype=torch.float32)
    return (dy.to(dtype).to(device),)
