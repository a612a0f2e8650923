import torch


def swiglu_fwd_bwd(a, b, dy):
    acc = torch.promote_types(a.dtype, torch.float32)
    a = a.detach().to(acc).requires_grad_(True)
    b = b.detach().to(acc).requires_grad_(True)
    y = torch.nn.functional.silu(a) * b
    y.backward(dy.to(acc))
    dt = dy.dtype
    return y.detach().to(dt), a.grad.to(dt), b.grad.to(dt)
