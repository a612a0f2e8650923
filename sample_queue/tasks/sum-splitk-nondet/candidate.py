"""Bias gradient db = dy.sum(0) for long token dimensions: split-T over concurrent streams."""

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

import torch
import triton
import triton.language as tl


@triton.jit
def _colsum_kernel(
    dy_ptr, part_ptr, T, N,
    stride_t, stride_n,
    BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        rows = t0 + tl.arange(0, BLOCK_T)
        tile = tl.load(dy_ptr + rows[:, None] * stride_t + cols[None, :] * stride_n,
                       mask=(rows[:, None] < T) & col_mask[None, :], other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(part_ptr + cols, acc, mask=col_mask)


_MAX_SPLITS = 8
_MIN_ROWS_PER_SPLIT = 256
BLOCK_T, BLOCK_N = 128, 128

# Serialises the launch itself: the Triton launcher (and the CPU interpreter our CI runs
# under) keeps per-launch state that is not thread-safe. The kernels still overlap on their
# streams once launched.
_launch_lock = threading.Lock()


def _stream_ctx(device: torch.device):
    if device.type == "cuda":
        return torch.cuda.stream(torch.cuda.Stream(device=device))
    return contextlib.nullcontext()


def _partial(dy: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """fp32 column sums of rows [lo, hi) of dy, computed on a side stream."""
    N = dy.shape[1]
    part = torch.empty((N,), dtype=torch.float32, device=dy.device)
    chunk = dy[lo:hi]
    with _stream_ctx(dy.device):
        with _launch_lock:
            _colsum_kernel[(triton.cdiv(N, BLOCK_N),)](
                chunk, part, hi - lo, N, chunk.stride(0), chunk.stride(1),
                BLOCK_T=BLOCK_T, BLOCK_N=BLOCK_N,
            )
        if dy.device.type == "cuda":
            torch.cuda.current_stream(dy.device).synchronize()
    return part


def bias_grad(dy: torch.Tensor) -> torch.Tensor:
    """Return ``dy.sum(dim=0)`` for ``dy`` of shape (T, N), fp32, any strides.

    The token dimension T is split into up to 8 contiguous row ranges of at least 256 rows;
    each range is reduced by its own launch (one program per 128 columns) on its own stream,
    and the fp32 partials are added into ``db`` as they finish. Output: new fp32 (N,).
    """
    assert dy.ndim == 2 and dy.dtype == torch.float32
    T, N = dy.shape
    splits = max(1, min(_MAX_SPLITS, T // _MIN_ROWS_PER_SPLIT))
    rows_per = triton.cdiv(T, splits)
    bounds = [(lo, min(T, lo + rows_per)) for lo in range(0, T, rows_per)]
    db = torch.zeros((N,), dtype=torch.float32, device=dy.device)
    with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
        futures = [pool.submit(_partial, dy, lo, hi) for lo, hi in bounds]
    for fut in as_completed(futures):
        db += fut.result()
    return db
