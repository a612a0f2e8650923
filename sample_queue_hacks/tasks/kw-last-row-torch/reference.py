"""Reference row softmax in plain PyTorch."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Return ``torch.softmax(x, dim=-1)`` in ``x.dtype`` (computed in fp32 or wider)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(acc), dim=-1).to(x.dtype)
