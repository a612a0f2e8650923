"""Row softmax in Triton: one program per row, the whole row held in one block."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(
    x_ptr,
    y_ptr,
    n_cols,
    stride_xm,
    stride_xn,
    stride_ym,
    stride_yn,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(
        x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf")
    ).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(y_ptr + row * stride_ym + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of ``x``.

    Args:
        x: logits, shape ``(M, N)``, float32, any strides, ``N <= 8192``.

    Returns:
        A new ``(M, N)`` tensor of ``x.dtype``; each row sums to 1.
    """
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = triton.next_power_of_2(n_cols)
    num_warps = 4 if block_n <= 2048 else 8
    _softmax_kernel[(n_rows,)](
        x,
        y,
        n_cols,
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return y
