import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["M"], case["N"], generator=g).to(dt)
    s = (1.3 + torch.rand(case["M"], generator=g)).to(dt)
    return x.to(device), s.to(device)
