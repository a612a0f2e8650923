import torch


def layernorm(x, w, b):
    """The production reference: always computes in float32 (as the model does)."""
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5)
    return y.to(x.dtype)
