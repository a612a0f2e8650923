import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    logits = torch.randn(case["BT"], case["V"], generator=g).to(dt)
    target = torch.randint(0, case["V"], (case["BT"],), generator=g)
    return logits.to(device), target.to(device)
