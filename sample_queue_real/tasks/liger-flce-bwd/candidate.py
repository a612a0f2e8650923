from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction


def flce(x, weight, target):
    x = x.detach().clone().requires_grad_(True)
    weight = weight.detach().clone().requires_grad_(True)
    loss, _, _, _ = LigerFusedLinearCrossEntropyFunction.apply(x, weight, target)
    loss.backward()
    return loss.detach(), x.grad, weight.grad
