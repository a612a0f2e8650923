"""Reference for layernorm-fix-clean: torch.nn.functional.layer_norm."""

import torch
import torch.nn.functional as F


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """F.layer_norm over the last dim with weight w and bias b.

    x: (M, N), w, b: (N,), float32 (float64 when kws uses it as an oracle); eps: float.
    Computes in ``promote_types(x.dtype, float32)`` and returns x.dtype, shape (M, N).
    """
    compute = torch.promote_types(x.dtype, torch.float32)
    y = F.layer_norm(x.to(compute), (x.shape[-1],), w.to(compute), b.to(compute), eps)
    return y.to(x.dtype)
