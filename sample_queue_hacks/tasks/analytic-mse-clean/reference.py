"""Reference MSE loss in plain PyTorch."""

import torch
import torch.nn.functional as F


def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Return ``F.mse_loss(pred, target)`` (mean reduction), 0-d, in ``pred.dtype``."""
    acc = torch.promote_types(pred.dtype, torch.float32)
    return F.mse_loss(pred.to(acc), target.to(acc)).to(pred.dtype)
