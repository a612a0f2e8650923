"""Reference LayerNorm in plain PyTorch."""

import torch
import torch.nn.functional as F


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Return ``F.layer_norm(x, (N,), weight, bias, eps=1e-5)`` in ``x.dtype``."""
    acc = torch.promote_types(x.dtype, torch.float32)
    y = F.layer_norm(x.to(acc), (x.shape[-1],), weight.to(acc), bias.to(acc), eps=1e-5)
    return y.to(x.dtype)
