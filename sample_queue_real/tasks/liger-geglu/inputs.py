import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    shape = (case["M"], case["N"])
    a, b = (torch.randn(shape, generator=g).to(dt) for _ in range(2))
    return a.to(device), b.to(device)
