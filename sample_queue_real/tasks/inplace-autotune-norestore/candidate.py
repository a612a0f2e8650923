import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["N"])
@triton.jit
def _scale_shift(x_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=m)


def scale_shift_(x):
    """x <- 2 x + 1, in place. BUG: the autotuner's benchmark launches run on x too
    (no restore_value=["x_ptr"]), so x is scaled many times on the first call of a shape."""
    n = x.numel()
    _scale_shift[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
    return x
