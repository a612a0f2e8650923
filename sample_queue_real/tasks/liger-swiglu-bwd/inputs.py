import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    shape = (case["M"], case["N"])
    a, b, dy = (torch.randn(shape, generator=g).to(dt) for _ in range(3))
    return a.to(device), b.to(device), dy.to(device)
