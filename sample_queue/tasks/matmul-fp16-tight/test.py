"""The author's test: the Triton GEMM against torch.matmul."""

import importlib.util
import pathlib

import torch

_HERE = pathlib.Path(__file__).resolve().parent


def _load(stem: str, name: str):
    spec = importlib.util.spec_from_file_location(f"matmul_fp16_tight_{stem}", _HERE / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def check(case: dict, device: torch.device, seed: int) -> None:
    """Raise AssertionError when the kernel and torch.matmul differ beyond 1e-6."""
    a, b = _load("inputs", "make_inputs")(case, device, seed)
    got = _load("candidate", "matmul")(a, b)
    expected = _load("reference", "matmul")(a, b)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
