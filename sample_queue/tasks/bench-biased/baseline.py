"""The epilogue as written in the model."""

import torch
import torch.nn.functional as F


def epilogue(x: torch.Tensor, bias: torch.Tensor, scale: float, residual: torch.Tensor) -> torch.Tensor:
    """``residual + scale * silu(x + bias)``; x, residual (M, N), bias (N,). A new tensor."""
    return residual + scale * F.silu(x + bias)
