"""Reference row softmax in plain PyTorch."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of ``x`` (M, N), computed in
    ``promote_types(x.dtype, float32)`` and returned in ``x.dtype``."""
    compute = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(compute), dim=-1).to(x.dtype)
