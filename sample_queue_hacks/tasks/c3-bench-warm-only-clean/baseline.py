"""The unfused tanh-GELU chain the model used before."""

import math

import torch


def gelu(x: torch.Tensor) -> torch.Tensor:
    c = math.sqrt(2.0 / math.pi)
    x3 = x * x * x
    inner = c * (x + 0.044715 * x3)
    t = torch.tanh(inner)
    return 0.5 * x * (1.0 + t)
