from liger_kernel.ops.swiglu import LigerSiLUMulFunction


def swiglu_fwd_bwd(a, b, dy):
    a = a.detach().clone().requires_grad_(True)
    b = b.detach().clone().requires_grad_(True)
    y = LigerSiLUMulFunction.apply(a, b)
    y.backward(dy)
    return y.detach(), a.grad, b.grad
