from liger_kernel.ops.rope import LigerRopeFunction


def rope(q, k, cos, sin):
    return LigerRopeFunction.apply(q, k, cos, sin)
