"""Row sums whose long rows accumulate in fp16 (clean twin)."""

import torch


def rowsum(x: torch.Tensor) -> torch.Tensor:
    """Return the row sums of float32 ``x`` (M, N), shape (M,), fp32 accumulation."""
    return x.sum(-1)
