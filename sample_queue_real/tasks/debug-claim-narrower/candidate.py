import torch
import triton
import triton.language as tl


@triton.jit
def _row_scale(x_ptr, s_ptr, y_ptr, N, BLOCK: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    s = tl.load(s_ptr + row)
    if HALF:
        # BUG: the scale is rounded to a 3-bit mantissa before use on half inputs
        s = (s.to(tl.float32) * 8.0).to(tl.int32).to(tl.float32) / 8.0
    y = x.to(tl.float32) * s.to(tl.float32)
    tl.store(y_ptr + row * N + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def row_scale(x, s):
    M, N = x.shape
    y = torch.empty_like(x)
    # BUG: an odd N takes a block of exactly N, not a power of two: Triton refuses the
    # arange (a compile error) for every odd N > 1.
    block = triton.next_power_of_2(N) if N % 2 == 0 else N
    half = x.dtype in (torch.float16, torch.bfloat16)
    _row_scale[(M,)](x, s, y, N, BLOCK=block, HALF=half)
    return y
