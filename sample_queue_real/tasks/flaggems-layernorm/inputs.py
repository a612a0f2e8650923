import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    M, N = case["M"], case["N"]
    x = torch.randn(M, N, generator=g).to(dt)
    w = (1 + 0.1 * torch.randn(N, generator=g)).to(dt)
    b = (0.1 * torch.randn(N, generator=g)).to(dt)
    return x.to(device), w.to(device), b.to(device)
