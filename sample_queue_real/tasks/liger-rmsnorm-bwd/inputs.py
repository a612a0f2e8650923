import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["M"], case["N"], generator=g).to(dt)
    w = (1 + 0.1 * torch.randn(case["N"], generator=g)).to(dt)
    dy = torch.randn(case["M"], case["N"], generator=g).to(dt)
    return x.to(device), w.to(device), dy.to(device), 1e-6
