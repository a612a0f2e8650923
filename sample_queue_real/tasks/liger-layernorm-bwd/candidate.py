from liger_kernel.ops.layer_norm import LigerLayerNormFunction


def layernorm_bwd(x, w, b, dy):
    x = x.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    b = b.detach().clone().requires_grad_(True)
    y = LigerLayerNormFunction.apply(x, w, b, 1e-6)
    y.backward(dy)
    return x.grad, w.grad, b.grad
