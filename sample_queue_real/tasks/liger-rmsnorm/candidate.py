from liger_kernel.ops.rms_norm import LigerRMSNormFunction


def rmsnorm(x, w, eps):
    return LigerRMSNormFunction.apply(x, w, eps)
