"""Reference ReLU in plain PyTorch, writing into the caller's buffer."""

import torch


def relu(x: torch.Tensor, out: torch.Tensor) -> None:
    """Write ``max(x, 0)`` (exact) into ``out``; ``x`` and ``out`` have the same shape.

    Computes in ``promote_types(x.dtype, float32)`` and stores in ``out.dtype``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    out.copy_(torch.relu(x.to(acc)).to(out.dtype))
