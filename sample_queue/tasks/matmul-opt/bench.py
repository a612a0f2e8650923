"""Author's benchmark for matmul-opt: candidate vs baseline on the same inputs.

On a GPU both sides are timed by triton.testing.do_bench (median of the timed runs,
warm-up runs first, so compilation is excluded on both sides, and the L2 cache flushed
before every timed run on both sides). On the CPU (Triton interpreter) both sides are
timed the same way with a wall clock: one untimed warm-up call, then the median of 5.
"""

import importlib.util
import statistics
import time
from pathlib import Path

import torch
import triton

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(f"matmul_opt_bench_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time_ms(fn, device: torch.device) -> float:
    """Median runtime of fn() in milliseconds."""
    if device.type == "cuda":
        return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
    fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run(case: dict, device: torch.device) -> dict:
    """Time candidate.matmul and baseline.matmul on the same (a, b) of one case.

    Returns {"candidate_ms": float, "baseline_ms": float}.
    """
    a, b = _load("inputs").make_inputs(case, device, 0)
    candidate = _load("candidate").matmul
    baseline = _load("baseline").matmul
    return {
        "candidate_ms": _time_ms(lambda: candidate(a, b), device),
        "baseline_ms": _time_ms(lambda: baseline(a, b), device),
    }
