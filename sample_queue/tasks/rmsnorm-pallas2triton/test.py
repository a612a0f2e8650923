"""Author's test for rmsnorm-pallas2triton."""

import importlib.util
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(
        f"rmsnorm_pallas2triton_{name}", _HERE / f"{name}.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=1e-3, rtol=2e-3),
}


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare candidate with reference on one case; raises AssertionError on mismatch."""
    x, w, eps = _load("inputs").make_inputs(case, device, seed)
    got = _load("candidate").rmsnorm(x, w, eps)
    want = _load("reference").rmsnorm(x, w, eps)
    torch.testing.assert_close(got, want, **_TOL[x.dtype])
