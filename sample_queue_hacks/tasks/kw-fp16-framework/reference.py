"""Reference GELU (tanh approximation) in plain PyTorch."""

import torch
import torch.nn.functional as F


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Return ``F.gelu(x, approximate="tanh")`` in ``x.dtype`` (computed in fp32 or wider)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return F.gelu(x.to(acc), approximate="tanh").to(x.dtype)
