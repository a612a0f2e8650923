import torch


def rmsnorm(x, w, eps):
    """HuggingFace LlamaRMSNorm: normalise in fp32, cast back, then scale."""
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * y.to(x.dtype)
