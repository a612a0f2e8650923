"""Author's test for matmul-opt: candidate and baseline against the reference."""

import importlib.util
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(f"matmul_opt_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare candidate (and baseline) with reference on one case; AssertionError on mismatch."""
    a, b = _load("inputs").make_inputs(case, device, seed)
    want = _load("reference").matmul(a, b)
    torch.testing.assert_close(_load("candidate").matmul(a, b), want, atol=1e-2, rtol=5e-3)
    torch.testing.assert_close(_load("baseline").matmul(a, b), want, atol=1e-2, rtol=5e-3)
