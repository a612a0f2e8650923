"""Inputs for the long-row softmax task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x,)``: logits of shape ``(case["M"], case["N"])``, dtype ``case["dtype"]``.

    Each row sits at its own logit level (normal, sd 20, so levels reach |x| ~ 60) to
    exercise the max subtraction. Drawn on the CPU from ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    level = 20.0 * torch.randn((M, 1), generator=g, dtype=torch.float32)
    x = level.expand(M, N).contiguous()
    return (x.to(dtype).to(device),)
