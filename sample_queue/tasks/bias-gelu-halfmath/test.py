"""Author's test for bias-gelu-halfmath."""

import importlib.util
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(f"bias_gelu_fusion_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare candidate with reference on one case; raises AssertionError on mismatch."""
    x, bias = _load("inputs").make_inputs(case, device, seed)
    got = _load("candidate").bias_gelu(x, bias)
    want = _load("reference").bias_gelu(x, bias)
    torch.testing.assert_close(got, want, atol=1e-3, rtol=2e-3)
