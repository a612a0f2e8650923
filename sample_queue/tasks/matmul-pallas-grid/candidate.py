"""Tiled matmul as a JAX Pallas kernel: C = A @ B.

Each grid step computes one BLOCK_M x BLOCK_N tile of C from a BLOCK_M x K panel of A and
a K x BLOCK_N panel of B, accumulating in float32 (preferred_element_type) and rounding
once to the output dtype. The callable takes and returns torch tensors (task format) and
converts with dlpack.
"""

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

BLOCK_M = 32
BLOCK_N = 32


def _matmul_kernel(a_ref, b_ref, c_ref):
    acc = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    c_ref[...] = acc.astype(c_ref.dtype)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: (M, K), b: (K, N), float16 or float32, any strides -> new (M, N) of a.dtype."""
    M, K = a.shape
    N = b.shape[1]
    aj = jnp.from_dlpack(a.contiguous())
    bj = jnp.from_dlpack(b.contiguous())
    c = pl.pallas_call(
        _matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), aj.dtype),
        grid=(M // BLOCK_M, N // BLOCK_N),
        in_specs=[pl.BlockSpec((BLOCK_M, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, BLOCK_N), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
    )(aj, bj)
    return torch.from_dlpack(c)
