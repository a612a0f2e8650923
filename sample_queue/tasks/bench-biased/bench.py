"""The author's benchmark: baseline epilogue against the rewrite."""

import importlib.util
import pathlib
import statistics
import time

import torch

_HERE = pathlib.Path(__file__).resolve().parent
WARMUP = 5
REPS = 20


def _load(stem: str, name: str):
    spec = importlib.util.spec_from_file_location(f"bench_biased_{stem}", _HERE / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(case: dict, device: torch.device) -> dict:
    """Time baseline and candidate on one [benchmark] case; milliseconds per call."""
    make_inputs = _load("inputs", "make_inputs")
    baseline = _load("baseline", "epilogue")
    candidate = _load("candidate", "epilogue")

    # Baseline: the epilogue as the training step sees it, on a fresh batch every step.
    baseline_times = []
    for step in range(REPS):
        x, bias, scale, residual = make_inputs(case, device, seed=step)
        _sync(device)
        start = time.perf_counter()
        baseline(x.clone(), bias, scale, residual.clone())
        _sync(device)
        baseline_times.append((time.perf_counter() - start) * 1e3)

    # Candidate: steady-state time per call.
    x, bias, scale, residual = make_inputs(case, device, seed=0)
    for _ in range(WARMUP):
        candidate(x, bias, scale, residual)
    _sync(device)
    candidate_times = []
    for _ in range(REPS):
        start = time.perf_counter()
        candidate(x, bias, scale, residual)
        _sync(device)
        candidate_times.append((time.perf_counter() - start) * 1e3)

    return {
        "candidate_ms": statistics.median(candidate_times),
        "baseline_ms": statistics.mean(baseline_times),
    }
