"""Inputs for the ReLU task: activations and the output buffer."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, out)``: ``x`` standard normal (M, N) in ``case["dtype"]`` (seeded CPU
    generator); ``out`` the output buffer of the same shape and dtype (``out_args = [1]``)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
    x = x.to(getattr(torch, case["dtype"]))
    return (x.to(device), torch.zeros_like(x).to(device))
