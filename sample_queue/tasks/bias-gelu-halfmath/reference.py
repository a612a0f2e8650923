"""Reference for bias-gelu-halfmath: bias add and tanh-approximation GELU in fp32 (or wider)."""

import torch
import torch.nn.functional as F


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(x + bias), broadcasting bias over rows.

    gelu_tanh(z) = 0.5 * z * (1 + tanh(sqrt(2/pi) * (z + 0.044715 * z**3))).
    x: (M, N), bias: (N,), float16 (float64 when kws uses it as an oracle). Computes in
    ``promote_types(x.dtype, float32)`` and returns x.dtype, shape (M, N).
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    z = x.to(compute) + bias.to(compute)
    return F.gelu(z, approximate="tanh").to(x.dtype)
