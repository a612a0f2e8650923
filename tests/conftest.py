"""Shared fixtures: tiny synthetic tasks written to tmp folders, one runner per module."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_QUEUE = REPO / "sample_queue"

# kws stores its per-user data under these; tests must never touch a real user's folders
os.environ.setdefault("KWS_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "kws-test-cache"))

TASK_TOML = """\
schema = 1
id = "{id}"
title = "elementwise add"
kind = "generation"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:add"
reference = "reference.py:add"
inputs = "inputs.py:make_inputs"

[params]
N = {{ min = 1, max = 4096 }}

[[cases]]
N = 64
dtype = "float32"

[[cases]]
N = 100
dtype = "float32"

[tolerance]
atol = 1e-6
rtol = 1e-6

[claims]
status = "{status}"
failure_class = "{failure_class}"
"""

INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["N"], generator=g).to(dt)
    y = torch.randn(case["N"], generator=g).to(dt)
    return x.to(device), y.to(device)
"""

REFERENCE = """\
def add(x, y):
    return x + y
"""


def write_task(root: Path, task_id: str = "add", candidate: str = "def add(x, y):\n    return x + y\n",
               status: str = "pass", failure_class: str = "", toml: str | None = None) -> Path:
    """Write a small torch task folder under ``root/tasks/<task_id>`` and return it."""
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(toml or TASK_TOML.format(id=task_id, status=status, failure_class=failure_class))
    (d / "spec.md").write_text("# add\n\nout = x + y, elementwise, fp32.\n")
    (d / "candidate.py").write_text(textwrap.dedent(candidate))
    (d / "reference.py").write_text(REFERENCE)
    (d / "inputs.py").write_text(INPUTS)
    return d


@pytest.fixture
def task_factory(tmp_path: Path):
    """``task_factory(candidate_source, **kw) -> task folder`` in a fresh queue folder."""

    def make(candidate: str = "def add(x, y):\n    return x + y\n", **kw) -> Path:
        return write_task(tmp_path, candidate=candidate, **kw)

    return make


@pytest.fixture(scope="module")
def runner():
    """One fork server for a test module (CPU, Triton interpreter when no GPU)."""
    from workstation.runner import Runner

    with Runner() as r:
        yield r
