"""The fix: Triton LayerNorm forward with the row in a power-of-two block of masked lanes.

The buggy version (baseline.py) used BLOCK = N, and tl.arange needs a power-of-two range,
so N = 1000 did not compile. Here BLOCK = next_power_of_2(N); loads and the store are
masked (cols < N), and the padded lanes of the centred row are zeroed so that they add
nothing to the variance. The kernel addresses rows as row * N (the wrapper's inputs are
row-major).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_w, stride_b, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row.to(tl.int64) * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = tl.math.rsqrt(var + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row.to(tl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dim: y = (x - mean) * rsqrt(var + eps) * w + b.

    x: (M, N) float32; w, b: (N,) float32; eps: Python float. Biased variance
    (divide by N), as F.layer_norm. Returns a new (M, N) float32 tensor.
    """
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    _layernorm_fwd_kernel[(M,)](x, w, b, y, N, float(eps), w.stride(0), b.stride(0),
                                BLOCK=triton.next_power_of_2(N), num_warps=4)
    return y
