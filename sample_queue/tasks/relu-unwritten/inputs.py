"""Inputs for the ReLU task: the activations and the output buffer."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, out)`` for ``relu(x, out)``.

    ``x``: pre-activation values of shape ``(case["M"], case["N"])``, standard normal (about
    half negative), drawn on the CPU from ``torch.Generator().manual_seed(seed)`` and cast to
    ``case["dtype"]``. ``out``: the output buffer, same shape and dtype (index 1 of
    ``out_args``).
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32).to(dtype)
    out = torch.zeros_like(x)
    return (x.to(device), out.to(device))
