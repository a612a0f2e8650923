"""Reference row softmax in plain PyTorch."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of ``x`` (M, N); returns ``x.dtype``.

    Computes in ``promote_types(x.dtype, float32)``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(acc), dim=-1).to(x.dtype)
