"""The code before the fix: Triton LayerNorm forward, one program per row, the row in one
block of exactly N lanes (tl.arange(0, N): only a power-of-two N compiles)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_fwd_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    N,
    eps,
    stride_xm,
    stride_xn,
    stride_w,
    stride_b,
    stride_ym,
    stride_yn,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + cols * stride_xn).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = x - mean
    var = tl.sum(xc * xc, axis=0) / N
    rstd = tl.math.rsqrt(var + eps)
    w = tl.load(w_ptr + cols * stride_w).to(tl.float32)
    b = tl.load(b_ptr + cols * stride_b).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row.to(tl.int64) * stride_ym + cols * stride_yn, y.to(y_ptr.dtype.element_ty))


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dim: y = (x - mean) * rsqrt(var + eps) * w + b.

    x: (M, N) float32, any strides; w, b: (N,) float32; eps: Python float.
    Biased variance (divide by N), as F.layer_norm. Returns a new (M, N) float32 tensor.
    """
    if x.ndim != 2 or w.shape != (x.shape[1],) or b.shape != (x.shape[1],):
        raise ValueError(
            f"expected x (M, N), w (N,), b (N,); got {tuple(x.shape)}, {tuple(w.shape)}, {tuple(b.shape)}"
        )
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    _layernorm_fwd_kernel[(M,)](
        x, w, b, y, N, float(eps),
        x.stride(0), x.stride(1),
        w.stride(0), b.stride(0),
        y.stride(0), y.stride(1),
        BLOCK=N,
        num_warps=4,
    )
    return y
