import torch


def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    B, H, S, D = case["B"], case["H"], case["S"], case["D"]
    q = torch.randn(B, H, S, D, generator=g).to(dt)
    k = torch.randn(B, H, S, D, generator=g).to(dt)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    t = torch.arange(S, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return q.to(device), k.to(device), emb.cos().to(dt).to(device), emb.sin().to(dt).to(device)
