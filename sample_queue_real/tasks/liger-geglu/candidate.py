from liger_kernel.ops.geglu import LigerGELUMulFunction


def geglu(a, b):
    return LigerGELUMulFunction.apply(a, b)
