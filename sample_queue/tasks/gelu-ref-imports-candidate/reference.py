"""Reference for the tanh-approximate GELU.

    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))

The tanh is taken from the kernel module, so that the reference and the kernel share one
implementation of the saturating tanh and the reference checks the polynomial around it.
"""

import importlib.util
import math
import pathlib

import torch

_spec = importlib.util.spec_from_file_location(
    "gelu_ref_imports_candidate_kernels", pathlib.Path(__file__).resolve().with_name("candidate.py")
)
_kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_kernels)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """tanh-GELU of ``x`` (M, N), computed in ``promote_types(x.dtype, float32)``, returned
    in ``x.dtype``."""
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    inner = math.sqrt(2.0 / math.pi) * (xc + 0.044715 * xc.pow(3))
    return (0.5 * xc * (1.0 + _kernels.tanh(inner))).to(x.dtype)
