"""Reference GELU (tanh approximation) in fp32 or wider."""

import torch
import torch.nn.functional as F


def gelu(x: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(x) for x (M, N): computed in promote_types(x.dtype, float32), returned in x.dtype."""
    compute = torch.promote_types(x.dtype, torch.float32)
    return F.gelu(x.to(compute), approximate="tanh").to(x.dtype)
