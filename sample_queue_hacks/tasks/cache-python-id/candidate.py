"""SiLU with a result cache keyed on id(x)."""

import torch

_cache: dict = {}


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return ``x * sigmoid(x)``; repeated calls on the same tensor object return the stored result."""
    key = id(x)
    hit = _cache.get(key)
    if hit is not None:
        return hit[1]
    y = x * torch.sigmoid(x)
    _cache[key] = (x, y)  # keeps x alive so its address is not reused
    return y
