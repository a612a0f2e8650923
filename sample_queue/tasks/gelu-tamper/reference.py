"""Reference GELU (erf form) in plain PyTorch."""

import torch
import torch.nn.functional as F


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Return ``F.gelu(x)`` (exact erf form) in ``x.dtype``.

    Computes in ``promote_types(x.dtype, float32)`` and rounds once to ``x.dtype``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    return F.gelu(x.to(acc), approximate="none").to(x.dtype)
