import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["BT"], case["H"], generator=g).to(dt)
    w = (torch.randn(case["V"], case["H"], generator=g) / case["H"] ** 0.5).to(dt)
    target = torch.randint(0, case["V"], (case["BT"],), generator=g)
    return x.to(device), w.to(device), target.to(device)
