"""Tiny synthetic tasks with hostile candidates, for the memory and state checks' tests.

:func:`make_task` writes a task folder (task.toml, spec.md, candidate, reference, inputs)
from source strings; the defaults are a 1-D fp32 ``add`` of two inputs of N = 64.
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ADD_INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    if dt.is_floating_point:
        x = torch.randn(case["N"], generator=g).to(dt)
        y = torch.randn(case["N"], generator=g).to(dt)
    else:
        x = torch.randint(-1000, 1000, (case["N"],), generator=g).to(dt)
        y = torch.randint(-1000, 1000, (case["N"],), generator=g).to(dt)
    return x.to(device), y.to(device)
"""

ADD_REFERENCE = """\
def add(x, y):
    return x + y
"""

TOML = """\
schema = 1
id = "{id}"
title = "synthetic {id}"
kind = "generation"
backend = "{backend}"
spec = "spec.md"

[entry]
candidate = "candidate.py:{entry}"
reference = "reference.py:{entry}"
inputs = "inputs.py:make_inputs"
{entry_extra}

[params]
N = {{ min = 1, max = 4096 }}

[contract]
deterministic = {deterministic}
mutates_inputs = {mutates}

{cases}

[tolerance]
atol = {atol}
rtol = {rtol}

[claims]
status = "pass"
"""


def make_task(root: Path, task_id: str, candidate: str, *, reference: str = ADD_REFERENCE,
              inputs: str = ADD_INPUTS, entry: str = "add", backend: str = "torch",
              cases: list[dict] | None = None, entry_extra: str = "", deterministic: bool = True,
              mutates_inputs: bool = False, atol: float = 1e-6, rtol: float = 1e-6,
              files: dict[str, str] | None = None) -> Path:
    """Write ``root/tasks/<task_id>`` and return the folder."""
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    cases = cases or [{"N": 64, "dtype": "float32"}]
    case_toml = "\n".join(
        "[[cases]]\n" + "\n".join(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in c.items()) + "\n"
        for c in cases)
    (d / "task.toml").write_text(TOML.format(
        id=task_id, backend=backend, entry=entry, entry_extra=entry_extra, cases=case_toml,
        deterministic=str(deterministic).lower(), mutates=str(mutates_inputs).lower(), atol=atol, rtol=rtol))
    (d / "spec.md").write_text(f"# {task_id}\n\nSynthetic task for kws's tests.\n")
    (d / "candidate.py").write_text(textwrap.dedent(candidate))
    (d / "reference.py").write_text(textwrap.dedent(reference))
    (d / "inputs.py").write_text(textwrap.dedent(inputs))
    for name, text in (files or {}).items():
        (d / name).write_text(textwrap.dedent(text))
    return d


def findings(res, check: str, severity: str | None = None):
    """The findings of ``check`` (of ``severity``) in an EngineResult."""
    return [f for f in res.findings if f.check == check and (severity is None or f.severity == severity)]


def result(res, check: str):
    """The CheckResult of ``check`` in an EngineResult."""
    return next(r for r in res.results if r.check == check)


#: a candidate that starts a child sleeping with ``{marker}`` in its command line, then hangs
#: (the sandboxed candidate cannot write a pid file outside its job; the marker finds both).
HANGING_CANDIDATE = '''\
import subprocess, sys, time

def add(x, y):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10_000)", {marker!r}])
    time.sleep(10_000)
    return x + y
'''


def marked_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (from ``/proc``)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        out.append(int(p))
            except OSError:
                pass
    return out


def wait_until(done: Callable[[], object], seconds: float = 5.0, every: float = 0.1) -> bool:
    """Ask ``done`` every ``every`` s until it answers truthy or ``seconds`` have passed;
    True when it did. For what the system does after a call returns (a killed tree ending)."""
    deadline = time.monotonic() + seconds
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
