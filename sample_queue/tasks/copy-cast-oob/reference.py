"""Reference fp16 cast-copy in plain PyTorch."""

import torch


def cast_copy(x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` rounded to fp16 (nearest-even; overflow to ±inf) as a new contiguous tensor.

    The output dtype is float16 for every input dtype (fp64 inputs are rounded directly).
    """
    return x.to(torch.float16, copy=True).contiguous()
