"""Which legal case reaches a line of the candidate (workstation.checks.support.reach):
guards read from the source, their three-valued evaluation on what a case's inputs look like,
and the search of legal cases (``fallback``'s framework calls not seen at run time)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from workstation.checks.support import reach
from workstation.protocol.extras.calls import InputDesc
from workstation.task.model import ParamSpec
from workstation.task.sources import SourceFile, _aliases, _imports

SRC = '''
import numpy as np
import torch, triton
import torch.nn.functional as F
TILE = 32
SMALL = 4096

def _tail(x, y, n_full):
    y[:, n_full:] = F.silu(x[:, n_full:])

def silu(x, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    if x.numel() <= SMALL and x.dtype == torch.float16:
        return F.silu(x)
    if x.dtype == torch.float64:
        return torch.sigmoid(x) * x
    n_full = N - N % TILE
    kern[(M,)](x, y)
    if n_full < N:
        _tail(x, y, n_full)
    if M and N and False:
        y = torch.sigmoid(x)
    return y if N % 64 == 0 else torch.tanh(y)
'''
CASES = [{"M": 8, "N": 64, "dtype": "float32"}, {"M": 4, "N": 96, "dtype": "float32"}]


def _mod() -> tuple[SourceFile, ast.FunctionDef]:
    tree = ast.parse(SRC)
    mod = SourceFile(Path("/t/candidate.py"), "candidate.py", SRC, tree, _aliases(tree), _imports(tree))
    entry = mod.top_level_defs()["silu"]
    assert isinstance(entry, ast.FunctionDef)
    return mod, entry


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SRC.splitlines(), 1) if text in line)


def _task(dtypes: list[str]) -> SimpleNamespace:
    return SimpleNamespace(params={"M": ParamSpec(min=1, max=65536), "N": ParamSpec(min=1, max=65536)},
                           contract=SimpleNamespace(dtypes=dtypes))


def _model() -> reach.InputModel:
    desc = [[InputDesc(index=0, kind="tensor", dtype="float32", shape=[c["M"], c["N"]], stride=[c["N"], 1]),
             InputDesc(index=1, kind="float", value="1e-06")] for c in CASES]
    model = reach.fit_inputs(CASES, desc)
    assert model is not None
    return model


def test_the_inputs_follow_the_case_as_the_declared_cases_show():
    model = _model()
    x, eps = reach.predict_inputs(model, {"M": 3, "N": 5, "dtype": "float16"})
    assert x.shape == (3, 5) and x.dtype == reach.Dtype("float16") and x.stride == (5, 1) and eps == 1e-6


def test_a_size_and_dtype_gate_is_read_and_a_case_that_passes_it_is_found():
    mod, entry = _mod()
    g = reach.guards(mod, "silu", "silu", _line("return F.silu(x)"), "F.silu(x)")
    assert g is not None and "x.numel() <= SMALL" in g.text(mod)
    found = reach.search(mod, g, entry, _task(["float32", "float16"]), _model(), [CASES[0]], 10 ** 9)
    assert found and all(c["dtype"] == "float16" and c["M"] * c["N"] <= 4096 for c in found)
    # without float16 among the task's dtypes no legal case reaches it
    assert reach.search(mod, g, entry, _task(["float32"]), _model(), [CASES[0]], 10 ** 9) == []


def test_a_helper_is_reached_through_its_call_and_the_early_returns_before_it():
    mod, entry = _mod()
    g = reach.guards(mod, "silu", "_tail", _line("y[:, n_full:] = F.silu"))
    assert g is not None
    text = g.text(mod)
    assert "not (x.dtype == torch.float64)" in text and "(n_full < N)" in text
    found = reach.search(mod, g, entry, _task(["float32"]), _model(), [CASES[0]], 10 ** 9)
    assert found and all(c["N"] % 32 for c in found)  # a ragged N: the tail branch runs


def test_a_branch_that_is_always_false_is_dead_and_a_dtype_branch_outside_the_task_never_runs():
    mod, entry = _mod()
    dead = reach.guards(mod, "silu", "silu", _line("y = torch.sigmoid(x)"))
    assert dead is not None and reach.is_dead(mod, dead, entry)
    f64 = reach.guards(mod, "silu", "silu", _line("return torch.sigmoid(x) * x"))
    assert f64 is not None and not reach.is_dead(mod, f64, entry)
    assert reach.never_for_dtypes(mod, f64, entry, _model(), ["float32", "float16"])
    assert not reach.never_for_dtypes(mod, f64, entry, _model(), ["float64"])


def test_a_conditional_expression_guards_only_its_own_branch():
    mod, entry = _mod()
    g = reach.guards(mod, "silu", "silu", _line("return y if N % 64"), "torch.tanh(y)")
    assert g is not None and "not (N % 64 == 0)" in g.text(mod)
    assert reach.evaluate(mod, g, entry, reach.predict_inputs(_model(), {"M": 2, "N": 96, "dtype": "float32"}))
    assert reach.evaluate(mod, g, entry, reach.predict_inputs(_model(), {"M": 2, "N": 128, "dtype": "float32"})) \
        is False


def test_what_the_source_does_not_say_is_unknown_never_a_guess():
    mod, entry = _mod()
    g = reach.guards(mod, "silu", "silu", _line("return F.silu(x)"), "F.silu(x)")
    assert g is not None
    unknown_shape = [reach.TensorView((reach.UNKNOWN, reach.UNKNOWN), reach.Dtype("float16")), 1e-6]
    assert reach.evaluate(mod, g, entry, unknown_shape) is reach.UNKNOWN


def test_a_tensor_rebound_through_contiguous_or_a_cast_keeps_its_shape():
    src = "import torch\n\ndef f(x):\n    x = x.contiguous()\n    M, N = x.shape\n    if N % 32:\n        return torch.relu(x)\n    return x\n"
    tree = ast.parse(src)
    mod = SourceFile(Path("/t/c.py"), "c.py", src, tree, _aliases(tree), _imports(tree))
    entry = mod.top_level_defs()["f"]
    g = reach.guards(mod, "f", "f", 7)
    assert g is not None and isinstance(entry, ast.FunctionDef)
    assert reach.evaluate(mod, g, entry, [reach.TensorView((2, 33), reach.Dtype("float32"), (33, 1))]) is True
    assert reach.evaluate(mod, g, entry, [reach.TensorView((2, 64), reach.Dtype("float32"), (64, 1))]) is False


def test_helpers_that_call_each_other_end_the_walk():
    src = "import torch\n\ndef a(x):\n    return b(x)\n\ndef b(x):\n    if x.dim() > 1:\n        return a(x)\n    return torch.relu(x)\n\ndef f(x):\n    return x\n"
    tree = ast.parse(src)
    mod = SourceFile(Path("/t/c.py"), "c.py", src, tree, _aliases(tree), _imports(tree))
    assert reach.guards(mod, "f", "b", 9) is None  # not reached from the entry: no guard, no endless walk
