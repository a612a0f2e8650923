import torch


def make_inputs(case, device, seed):
    """As Cut Cross-Entropy's own test draws them: e ~ N(0, 1/D), c ~ N(0, 1), the first
    min(N, V) // 2 classifier rows equal to embeddings (large logits)."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    n, v, d = case["N"], case["V"], case["D"]
    e = torch.randn(n, d, generator=g) / d**0.5
    c = torch.randn(v, d, generator=g)
    k = min(n, v) // 2
    c[:k] = e[:k]
    targets = torch.randint(0, v, (n,), generator=g)
    return e.to(dt).to(device), c.to(dt).to(device), targets.to(device)
