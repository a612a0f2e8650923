import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    return (torch.randn(case["M"], case["N"], generator=g).to(dt).to(device),)
