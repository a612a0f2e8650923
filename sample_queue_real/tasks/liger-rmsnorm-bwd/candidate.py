from liger_kernel.ops.rms_norm import LigerRMSNormFunction


def rmsnorm_bwd(x, w, dy, eps):
    x = x.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    y = LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)
    y.backward(dy)
    return x.grad, w.grad
