"""Row scaling as a JAX Pallas kernel: out[i, j] = x[i, j] * s[i].

A 2-D grid of 32x32 tiles; each step scales one tile of x by its rows' factors. The
callable takes and returns torch tensors (task format) and converts with dlpack.
"""

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

BLOCK_R = 32
BLOCK_C = 32


def _scale_kernel(x_ref, s_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[...]


def row_scale(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """x: (R, C) float32, s: (R,) float32 -> (R, C) float32."""
    R, C = x.shape
    xj = jnp.from_dlpack(x.contiguous())
    sj = jnp.from_dlpack(s.contiguous()).reshape(R, 1)
    out = pl.pallas_call(
        _scale_kernel,
        out_shape=jax.ShapeDtypeStruct((R, C), xj.dtype),
        grid=(pl.cdiv(C, BLOCK_C), pl.cdiv(R, BLOCK_R)),
        in_specs=[pl.BlockSpec((BLOCK_R, BLOCK_C), lambda i, j: (i, j)),
                  pl.BlockSpec((BLOCK_R, 1), lambda i, j: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK_R, BLOCK_C), lambda i, j: (i, j)),
    )(xj, sj)
    return torch.from_dlpack(out)
