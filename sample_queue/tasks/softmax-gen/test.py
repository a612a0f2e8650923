"""Author's test for softmax-gen."""

import importlib.util
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(f"softmax_gen_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_TOL = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.float16: dict(atol=1e-5, rtol=2e-3),
}


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare candidate with reference on one case; raises AssertionError on mismatch."""
    (x,) = _load("inputs").make_inputs(case, device, seed)
    got = _load("candidate").softmax(x)
    want = _load("reference").softmax(x)
    torch.testing.assert_close(got, want, **_TOL[x.dtype])
