"""Reference per-row scaling in plain PyTorch."""

import torch


def scale_rows(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Return ``x * s[:, None]`` for ``x`` (M, N) and ``s`` (M,), in ``x.dtype``.

    Computes in ``promote_types(x.dtype, float32)`` and rounds once to ``x.dtype``.
    """
    acc = torch.promote_types(x.dtype, torch.float32)
    return (x.to(acc) * s.to(acc)[:, None]).to(x.dtype)
