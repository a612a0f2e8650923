"""Reference for gemm-cuda: plain PyTorch matmul with an fp32 (or wider) accumulator."""

import torch


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B.

    a: (M, K), b: (K, N), float16 (float64 when kws uses it as an oracle). Multiplies in
    ``promote_types(dtype, float32)`` and returns a's dtype, shape (M, N).
    """
    compute = torch.promote_types(a.dtype, torch.float32)
    return (a.to(compute) @ b.to(compute)).to(a.dtype)
