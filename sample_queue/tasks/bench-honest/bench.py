"""The author's benchmark: per-row loop against the vectorised rewrite."""

import importlib.util
import pathlib
import statistics
import time

import torch

_HERE = pathlib.Path(__file__).resolve().parent
WARMUP = 3
REPS = 50


def _load(stem: str, name: str):
    spec = importlib.util.spec_from_file_location(f"bench_honest_{stem}", _HERE / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_ms(fn, args, device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn(*args)
    _sync(device)
    return (time.perf_counter() - start) * 1e3


def run(case: dict, device: torch.device) -> dict:
    """Median milliseconds per call of candidate and baseline on one [benchmark] case.

    Both sides get the same inputs (one make_inputs call), the same warm-up, and are timed
    alternately, one call each per repetition, so that drift in machine load hits both.
    """
    make_inputs = _load("inputs", "make_inputs")
    baseline = _load("baseline", "normalize_rows")
    candidate = _load("candidate", "normalize_rows")
    args = make_inputs(case, device, seed=0)

    for _ in range(WARMUP):
        baseline(*args)
        candidate(*args)

    baseline_times, candidate_times = [], []
    for _ in range(REPS):
        baseline_times.append(_time_ms(baseline, args, device))
        candidate_times.append(_time_ms(candidate, args, device))
    return {
        "candidate_ms": statistics.median(candidate_times),
        "baseline_ms": statistics.median(baseline_times),
    }
