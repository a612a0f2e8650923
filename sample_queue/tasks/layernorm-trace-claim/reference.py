"""Reference LayerNorm: the framework op in fp32 or wider."""

import torch
import torch.nn.functional as F


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """F.layer_norm over the last dim of x (M, N) with w, b (N,); computed in
    promote_types(x.dtype, float32), returned in x.dtype."""
    c = torch.promote_types(x.dtype, torch.float32)
    return F.layer_norm(x.to(c), (x.shape[-1],), w.to(c), b.to(c), eps).to(x.dtype)
