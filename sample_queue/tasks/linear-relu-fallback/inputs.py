"""Inputs for the fused linear + bias + ReLU task."""

import torch


def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
    """Return ``(x, w, b)``: x (M, K), w (N, K), b (N,), all in ``case["dtype"]``.

    x standard normal; w and b scaled like nn.Linear's default init (uniform in
    +-1/sqrt(K)) times sqrt(3) so that |y| is O(1). Drawn on the CPU from
    ``torch.Generator().manual_seed(seed)``.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    M, N, K = case["M"], case["N"], case["K"]
    bound = (3.0 / K) ** 0.5
    x = torch.randn((M, K), generator=g, dtype=torch.float32)
    w = torch.empty((N, K), dtype=torch.float32).uniform_(-bound, bound, generator=g)
    b = torch.empty((N,), dtype=torch.float32).uniform_(-bound, bound, generator=g)
    return tuple(t.to(dtype).to(device) for t in (x, w, b))
