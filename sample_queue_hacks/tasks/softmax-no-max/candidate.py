"""Row softmax without the max subtraction."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row softmax as exp(x) / sum(exp(x)) (one pass fewer: no max)."""
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)
