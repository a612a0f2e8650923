import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["N"], generator=g).to(dt)
    boundaries = torch.sort(torch.randn(case["B"], generator=g)).values.to(dt)
    return x.to(device), boundaries.to(device)
