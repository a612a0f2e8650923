"""Matmul as an NKI kernel for Trainium, migrated from the Triton kernel in baseline.py.

C = A @ B, tiled as in the NKI matmul tutorial: the stationary operand is A transposed
(K on the 128 partitions), tiles of 128 (M) x 512 (N) accumulate over K tiles of 128 in an
fp32 PSUM buffer, and the result is copied to SBUF in the output dtype once and stored.
Every load and store is masked, so M, N and K need not be multiples of the tiles. The
callable takes and returns torch tensors (task format): on a Neuron device the kernel is
called on XLA tensors; elsewhere it runs in the NKI simulator on numpy arrays.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import torch

TILE_K = 128   # nl.tile_size.pmax: the partition dimension
TILE_M = 128   # nl.tile_size.gemm_stationary_fmax
TILE_N = 512   # nl.tile_size.gemm_moving_fmax


@nki.jit
def matmul_kernel(lhsT, rhs):
    """lhsT: (K, M), rhs: (K, N) in HBM -> result (M, N) in HBM, of lhsT's dtype."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    i_k = nl.arange(TILE_K)[:, None]
    i_m = nl.arange(TILE_M)[None, :]
    i_n = nl.arange(TILE_N)[None, :]
    i_mr = nl.arange(TILE_M)[:, None]
    for m in nl.affine_range(math.ceil(M / TILE_M)):
        for n in nl.affine_range(math.ceil(N / TILE_N)):
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(math.ceil(K / TILE_K)):
                a = nl.load(lhsT[k * TILE_K + i_k, m * TILE_M + i_m],
                            mask=(k * TILE_K + i_k < K) & (m * TILE_M + i_m < M))
                b = nl.load(rhs[k * TILE_K + i_k, n * TILE_N + i_n],
                            mask=(k * TILE_K + i_k < K) & (n * TILE_N + i_n < N))
                acc += nl.matmul(a, b, transpose_x=True)
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * TILE_M + i_mr, n * TILE_N + i_n], value=out,
                     mask=(m * TILE_M + i_mr < M) & (n * TILE_N + i_n < N))
    return result


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: (M, K), b: (K, N), float16 or float32 -> new (M, N) of a.dtype."""
    if a.device.type == "xla":  # a Neuron device (torch-neuronx)
        return matmul_kernel(a.t().contiguous(), b.contiguous())
    out = nki.simulate_kernel(matmul_kernel, np.ascontiguousarray(a.t().cpu().numpy()), b.cpu().numpy())
    return torch.from_numpy(np.asarray(out)).to(a.device)
