import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    a = torch.randn(case["M"], case["K"], generator=g).to(dt)
    b = torch.randn(case["K"], case["N"], generator=g).to(dt)
    return a.to(device), b.to(device)
