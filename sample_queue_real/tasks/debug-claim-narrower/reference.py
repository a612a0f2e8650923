import torch


def row_scale(x, s):
    acc = torch.promote_types(x.dtype, torch.float32)
    return (x.to(acc) * s.to(acc)[:, None]).to(x.dtype)
