"""Baseline for bias-gelu-halfmath: the unfused PyTorch pair (bias add, then tanh-GELU)."""

import torch
import torch.nn.functional as F


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(x + bias) as two PyTorch ops (two passes over the (M, N) tensor).

    x: (M, N) float16, bias: (N,) float16. Returns a new (M, N) float16 tensor.
    """
    return F.gelu(x + bias, approximate="tanh")
