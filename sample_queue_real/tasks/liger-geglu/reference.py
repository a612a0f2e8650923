import torch


def geglu(a, b):
    acc = torch.promote_types(a.dtype, torch.float32)
    y = torch.nn.functional.gelu(a.to(acc), approximate="tanh") * b.to(acc)
    return y.to(a.dtype)
