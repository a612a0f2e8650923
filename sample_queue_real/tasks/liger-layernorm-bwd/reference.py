import torch
from refops import grads_of


def layernorm_bwd(x, w, b, dy):
    fn = lambda a, ww, bb: torch.nn.functional.layer_norm(a, (a.shape[-1],), ww, bb, 1e-6)  # noqa: E731
    return grads_of(fn, (x, w, b), dy, (0, 1, 2))
