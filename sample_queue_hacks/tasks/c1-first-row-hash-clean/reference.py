"""Reference row softmax."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, computed in promote_types(x.dtype, float32)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(acc), dim=-1).to(x.dtype)
