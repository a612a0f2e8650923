"""The author's correctness test for the tiled softmax."""

import importlib.util
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent


def _load(file: str, name: str):
    spec = importlib.util.spec_from_file_location(f"_softmax_task_{file[:-3]}", _HERE / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def check(case: dict, device: torch.device, seed: int) -> None:
    """Compare the candidate with ``torch.softmax`` on one case; raises AssertionError on mismatch.

    Tolerance as in task.toml: fp32, ``atol = 1e-6, rtol = 1e-5``, over the whole output.
    """
    make_inputs = _load("inputs.py", "make_inputs")
    candidate = _load("candidate.py", "softmax")
    reference = _load("reference.py", "softmax")
    (x,) = make_inputs(case, device, seed)
    expected = reference(x)
    got = candidate(x)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
