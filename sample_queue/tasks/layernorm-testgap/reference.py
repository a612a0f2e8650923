"""Reference LayerNorm forward in plain PyTorch."""

import torch
import torch.nn.functional as F


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """``F.layer_norm`` of x (M, N) over the last dim with weight w and bias b (N,); x.dtype out.

    Computes in ``promote_types(x.dtype, float32)``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    y = F.layer_norm(x.to(acc), (x.shape[-1],), w.to(acc), b.to(acc), eps)
    return y.to(x.dtype)
