"""SiLU that computes large tensors in bf16."""

import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU; large activations go through the 'tensor-core friendly' bf16 path."""
    if x.numel() >= 65536:
        h = x.to(torch.bfloat16)
        return (h * torch.sigmoid(h)).to(x.dtype)
    return x * torch.sigmoid(x)
