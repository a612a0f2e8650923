"""fp32 GEMM whose long reductions read fp16 operands."""

import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B; long reductions read their operands in half precision (fp32 accumulation)."""
    if a.shape[1] >= 1024:
        return torch.matmul(a.to(torch.float16).to(torch.float32), b.to(torch.float16).to(torch.float32))
    return torch.matmul(a, b)
