import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["T"], case["D"], generator=g) * 0.5 + 0.3  # as fla's test draws it
    return (x.to(dt).to(device),)
