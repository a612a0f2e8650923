"""Inputs for the row-softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: logits of shape ``(case["M"], case["N"])`` in ``case["dtype"]``.

    The logits are ``0.5 * N(0, 1)`` draws, drawn on the CPU from a generator seeded with
    ``seed`` (deterministic) and then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 0.5 * torch.randn(case["M"], case["N"], generator=gen, dtype=torch.float32)
    return (x.to(dtype).to(device),)
