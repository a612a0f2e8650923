"""Inputs for the fp16 row-softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: (M, N) logits, 2 * N(0, 1), in ``case["dtype"]``.

    Drawn on the CPU from a generator seeded with ``seed``, then moved to ``device``.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x = 2.0 * torch.randn(case["M"], case["N"], generator=gen)
    return (x.to(dtype).to(device),)
