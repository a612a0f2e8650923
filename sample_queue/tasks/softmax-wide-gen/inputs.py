"""Inputs for softmax-wide-gen."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)`` with x of shape (case["M"], case["N"]) and dtype case["dtype"].

    x ~ 2 * N(0, 1): logits with a spread of a few units, so the softmax is neither
    uniform nor one-hot. Drawn on the CPU from a seeded generator, then moved to ``device``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 2.0 * torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    return (x.to(dtype).to(device),)
