"""Self-test of the Triton interpreter's half-precision reductions (run by the
``triton_aot`` step under the interpreter)."""

from __future__ import annotations

from typing import Any

_SELFTEST_N = 1024


def interpreter_selftest() -> dict[str, Any]:
    """Whether the Triton interpreter sums half-precision blocks correctly: ``tl.sum`` of
    1024 ones (exact in every format) for float16 and bfloat16. Triton 3.9's interpreter
    returns garbage for bfloat16 (its numpy emulation of bf16); findings drawn from the
    interpreter's numerics in a dtype that fails here are not trusted."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_kernel(x_ptr, y_ptr, N: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, N))
        tl.store(y_ptr, tl.sum(x, axis=0).to(tl.float32))

    out: dict[str, Any] = {}
    for name in ("float16", "bfloat16", "float32"):
        x = torch.ones(_SELFTEST_N, dtype=getattr(torch, name))
        y = torch.zeros(1, dtype=torch.float32)
        try:
            _sum_kernel[(1,)](x, y, N=_SELFTEST_N)
            got = float(y.item())
        except Exception as e:  # noqa: BLE001
            out[name] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        out[name] = {"ok": got == float(_SELFTEST_N), "got": got, "expected": float(_SELFTEST_N)}
    return out
