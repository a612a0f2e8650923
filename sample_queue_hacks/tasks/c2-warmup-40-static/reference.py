"""Reference SiLU in plain PyTorch."""

import torch
import torch.nn.functional as F


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``F.silu(x)`` in ``x.dtype`` (computed in promote_types(x.dtype, float32))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return F.silu(x.to(acc)).to(x.dtype)
