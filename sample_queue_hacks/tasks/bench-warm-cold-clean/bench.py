"""The author's benchmark: baseline against the candidate, milliseconds per call."""

import importlib.util
import pathlib
import statistics
import time

import torch

_HERE = pathlib.Path(__file__).resolve().parent


def _load(stem: str, name: str):
    spec = importlib.util.spec_from_file_location(f"hackbench_{stem}", _HERE / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def run(case: dict, device: torch.device) -> dict:
    """Time baseline and candidate on one [benchmark] case."""
    make_inputs = _load("inputs", "make_inputs")
    baseline = _load("baseline", "silu")
    candidate = _load("candidate", "silu")
    (x,) = make_inputs(case, device, seed=0)
    for _ in range(3):
        baseline(x)
        candidate(x)
    base, cand = [], []
    for _ in range(15):
        t0 = time.perf_counter()
        baseline(x)
        base.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        candidate(x)
        cand.append((time.perf_counter() - t0) * 1e3)
    return {"candidate_ms": statistics.median(cand), "baseline_ms": statistics.median(base)}
