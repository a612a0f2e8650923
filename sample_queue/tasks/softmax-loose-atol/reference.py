"""Reference row softmax in plain PyTorch."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of ``x`` (shape ``(M, N)``).

    Computed in ``promote_types(x.dtype, float32)`` and returned in ``x.dtype``, so float64
    inputs give a float64 oracle.
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(compute), dim=-1).to(x.dtype)
