"""Reference tanh-GELU."""

import torch
import torch.nn.functional as F


def gelu(x: torch.Tensor) -> torch.Tensor:
    acc = torch.promote_types(x.dtype, torch.float32)
    return F.gelu(x.to(acc), approximate="tanh").to(x.dtype)
