"""The source of this migration, runnable under Triton 3: gelu_triton2.py, unchanged, with a
compatibility shim for the one Triton 2.0 API it uses: tl.libdevice.erf, which Triton 3
provides as tl.math.erf (the shim makes tl.libdevice name the tl.math module, so both the
compiler and the interpreter resolve it).

The shim adds the missing attribute to triton.language in this process only when it is
absent; the kernel source itself is the original's.
"""

import torch
import triton.language as tl

if not hasattr(tl, "libdevice"):
    tl.libdevice = tl.math

from gelu_triton2 import gelu as _gelu_triton2  # noqa: E402  (after the shim)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU (erf form) as gelu_triton2.py computes it: fp32 math, output of x's dtype."""
    return _gelu_triton2(x)
