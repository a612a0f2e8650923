"""Reference row L2 normalisation."""

import torch
import torch.nn.functional as F


def normalize_rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / max(||x_row||_2, eps)`` for x (M, N) via ``F.normalize``, computed in
    ``promote_types(x.dtype, float32)`` and returned in ``x.dtype``."""
    compute = torch.promote_types(x.dtype, torch.float32)
    return F.normalize(x.to(compute), p=2.0, dim=1, eps=eps).to(x.dtype)
