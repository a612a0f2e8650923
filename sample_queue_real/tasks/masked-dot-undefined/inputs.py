import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case["M"], case["K"], generator=g)
    b = torch.randn(case["K"], case["N"], generator=g)
    return a.to(device), b.to(device)
