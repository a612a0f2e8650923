"""Reference linear + bias + ReLU in plain PyTorch."""

import torch
import torch.nn.functional as F


def linear_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``relu(x @ w.T + b)`` for x (M, K), w (N, K), b (N,), in ``x.dtype``.

    Computes in ``promote_types(x.dtype, float32)`` and rounds once to ``x.dtype``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.relu(F.linear(x.to(acc), w.to(acc), b.to(acc))).to(x.dtype)
