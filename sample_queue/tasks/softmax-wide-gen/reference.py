"""Reference for softmax-wide-gen: plain PyTorch row-wise softmax."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of ``x``.

    x: (M, N) float16, float32 or float64 (float64 when kws uses it as an oracle).
    Computes in ``promote_types(x.dtype, float32)`` and returns ``x.dtype``, shape (M, N).
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(compute), dim=-1).to(x.dtype)
