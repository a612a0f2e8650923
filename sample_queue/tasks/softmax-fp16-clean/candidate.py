"""Row softmax in Triton for rows of any width: an online (running max, rescaled sum) pass
over column blocks, then a normalising pass. fp32 arithmetic, one rounding at the store."""

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
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)

    # Lane-wise running max m and sum s of exp(x - m) over the column blocks.
    m = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs * stride_xn, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has only seen masked columns keeps m = -inf; shift it by 0 so that
        # exp(-inf - (-inf)) never forms a NaN.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new

    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    inv_sum = 1.0 / row_sum

    for start in range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs * stride_xn, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(y_row + offs * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension.

    Args:
        x: (M, N) float16 or float32, any strides, finite.

    Returns:
        A new (M, N) tensor of ``x.dtype``; each row sums to 1 up to rounding.
    """
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    _softmax_kernel[(n_rows,)](
        x,
        y,
        n_cols,
        x.stride(0),
        x.stride(1),
        y.stride(0),
        y.stride(1),
        BLOCK_N=block_n,
        num_warps=4,
    )
    return y
