"""Author's test for layernorm-debug: the kernel against F.layer_norm."""

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F

_HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Import a sibling file of this task by path (independent of sys.path)."""
    spec = importlib.util.spec_from_file_location(f"layernorm_debug_{name}", _HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare the kernel with F.layer_norm on one case; raises AssertionError on mismatch."""
    x, w, b, eps = _load("inputs").make_inputs(case, device, seed)
    got = _load("candidate").layer_norm(x, w, b, eps)
    want = F.layer_norm(x, (x.shape[-1],), w, b, eps)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
