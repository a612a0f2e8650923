"""Softplus as a JAX Pallas kernel: y = log(1 + exp(x)), computed stably.

A 1-D grid of 128-element blocks over a float32 vector.
The callable takes and returns torch tensors (task format) and converts with dlpack.
"""

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

BLOCK = 128


def _softplus_kernel(n_total, x_ref, o_ref):
    x = x_ref[...]
    y = jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))
    o_ref[...] = y  # lanes past n in the last block are dropped by Pallas


def softplus(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) float32 -> (n,) float32."""
    n = x.shape[0]
    xj = jnp.from_dlpack(x.contiguous())
    kernel = lambda x_ref, o_ref: _softplus_kernel(n, x_ref, o_ref)  # noqa: E731
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((n,), xj.dtype),
        grid=(pl.cdiv(n, BLOCK),),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
    )(xj)
    return torch.from_dlpack(out)
