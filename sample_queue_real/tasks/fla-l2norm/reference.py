import torch


def l2norm(x):
    """x / max(||x||_2, eps) along the last dim, in fp32 (flash-linear-attention's test
    reference is torch.nn.functional.normalize; its kernel computes x * rsqrt(sum(x^2) + eps))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + 1e-6)).to(x.dtype)
