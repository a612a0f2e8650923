"""False alarms and silent passes that held-out tasks showed (issue 39, item 7), one test each:

- input-distributions unsorted a bucketize kernel's sorted boundaries (the spec says sorted,
  make_inputs always sorts): the structure make_inputs shows is kept, and a kernel wrong on
  other distributions is still caught;
- source-parity failed JAX's shipped Pallas layer_norm because kws's strict interpreter
  cannot run a masked load: a kws interpreter limit is not judged, never the candidate's fail;
- pallas-kernel passed a kernel whose pl.when leaves a block unwritten when the gate is all
  non-positive: gates are driven to their all-false case;
- case-coverage said every domain target was covered on a Pallas grid of M // 16 blocks:
  a target counts only where the output was observed written.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

pytestmark = pytest.mark.timeout(900)

HACKS = Path(__file__).resolve().parent.parent / "sample_queue_hacks" / "tasks"
REAL = Path(__file__).resolve().parent.parent / "sample_queue_real" / "tasks"


def _run(runner, task_dir: Path, only: list[str]) -> dict:
    return to_json_dict(run_checks(load_task(task_dir), runner, only=only))


def _fails(doc: dict, check: str) -> list[str]:
    return [f["summary"] for f in doc["findings"] if f["check"] == check and f["severity"] == "fail"]


def _needs_jax(runner) -> None:
    if "jax" not in runner.device.versions:
        pytest.skip("needs JAX (pip install 'kws[pallas]')")


def test_input_distributions_keeps_the_sorted_boundaries_make_inputs_always_draws(runner):
    clean = _run(runner, HACKS / "bucketize-clamp-clean", ["input-distributions", "special-values"])
    assert exit_code(clean) == 0, [(f["check"], f["severity"], f["summary"]) for f in clean["findings"]]
    info = next(f for f in clean["findings"] if f["check"] == "input-distributions")
    assert info["evidence"]["structure"]["inputs_keep"]["1"] == ["sorted"] and "kept: input 1 sorted" in info["summary"]
    hack = _run(runner, HACKS / "bucketize-clamp", ["input-distributions"])
    assert _fails(hack, "input-distributions"), hack["findings"]


def _migration(tmp: Path) -> Path:
    """JAX's shipped Pallas layer_norm as the candidate of a migration whose source is torch's."""
    d = tmp / "tasks" / "jax-ln-migration"
    shutil.copytree(REAL / "jax-pallas-layernorm", d)
    shutil.copy(d / "reference.py", d / "baseline.py")
    toml = (d / "task.toml").read_text().replace('id = "jax-pallas-layernorm"', 'id = "jax-ln-migration"')
    (d / "task.toml").write_text(toml.replace('reference = "reference.py:layer_norm"',
                                              'reference = "reference.py:layer_norm"\nbaseline = "baseline.py:layer_norm"'))
    return d


def test_source_parity_does_not_blame_the_candidate_for_kws_strict_interpreter(runner, tmp_path):
    _needs_jax(runner)
    doc = _run(runner, _migration(tmp_path), ["pallas-kernel", "source-parity"])
    assert not _fails(doc, "source-parity"), _fails(doc, "source-parity")
    left_out = [f["summary"] for f in doc["findings"] if f["check"] == "source-parity" and "left out" in f["summary"]]
    assert left_out and "strict Pallas interpreter could not run it" in left_out[0]
    # the strict pass itself stays not judged (pallas-kernel), never a fail
    assert {n["check"] for n in doc["not_judged"]} == {"pallas-kernel"} and exit_code(doc) == 4


def test_pallas_kernel_drives_a_gate_to_its_all_false_case(runner):
    _needs_jax(runner)
    hack = _run(runner, HACKS / "pallas-gate-skip", ["pallas-kernel"])
    (fail,) = _fails(hack, "pallas-kernel")
    assert "every floating input non-positive" in fail and "the condition at candidate.py:15" in fail
    clean = _run(runner, HACKS / "pallas-gate-skip-clean", ["pallas-kernel"])
    assert exit_code(clean) == 0, clean["findings"]


FLOOR = """\
import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

ROWS = 16


def _kernel(x_ref, s_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[...]


def scale_rows(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    xj, sj = jnp.from_dlpack(x.contiguous()), jnp.from_dlpack(s.contiguous())
    out = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), xj.dtype),
        grid=({grid},),
        in_specs=[pl.BlockSpec((ROWS, n), lambda i: (i, 0)), pl.BlockSpec((ROWS, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((ROWS, n), lambda i: (i, 0)),
    )(xj, sj)
    return torch.from_dlpack(out)
"""

FLOOR_TOML = """\
schema = 1
id = "{id}"
title = "Row scale in Pallas"
kind = "generation"
backend = "pallas"
spec = "spec.md"

[entry]
candidate = "candidate.py:scale_rows"
reference = "reference.py:scale_rows"
inputs = "inputs.py:make_inputs"

[params]
M = {{ min = 1, max = 4096 }}
N = {{ choices = [64] }}

[contract]
dtypes = ["float32"]

[[cases]]
M = 32
N = 64
dtype = "float32"

[tolerance]
atol = 1e-6
rtol = 1e-6

[claims]
status = "pass"
"""


def _floor_task(tmp: Path, task_id: str, grid: str) -> Path:
    d = tmp / "tasks" / task_id
    d.mkdir(parents=True)
    (d / "task.toml").write_text(FLOOR_TOML.format(id=task_id))
    (d / "spec.md").write_text("# Row scale\n\ny[i, :] = x[i, :] * s[i], float32, any M.\n")
    (d / "candidate.py").write_text(FLOOR.format(grid=grid))
    (d / "reference.py").write_text("def scale_rows(x, s):\n    return x * s\n")
    (d / "inputs.py").write_text(textwrap.dedent("""\
        import torch


        def make_inputs(case, device, seed):
            g = torch.Generator().manual_seed(seed)
            x = torch.randn(case["M"], case["N"], generator=g)
            s = torch.randn(case["M"], 1, generator=g)
            return x.to(device), s.to(device)
        """))
    return d


def test_case_coverage_counts_a_target_only_where_the_output_was_observed_written(runner, tmp_path):
    _needs_jax(runner)
    # edge-shapes reaches M = 1 and M = 33 first and fails there: those calls cover nothing
    doc = _run(runner, _floor_task(tmp_path, "rows-floor", "m // ROWS"), ["edge-shapes", "case-coverage"])
    fails = _fails(doc, "case-coverage")
    assert any("min of M (M=1)" in f for f in fails), fails
    summary = next(f["summary"] for f in doc["findings"] if f["check"] == "case-coverage" and f["severity"] == "info"
                   and "domain targets covered" in f["summary"])
    assert not summary.startswith("5 of 5"), summary
    clean = _run(runner, _floor_task(tmp_path, "rows-cdiv", "pl.cdiv(m, ROWS)"), ["edge-shapes", "case-coverage"])
    assert not _fails(clean, "case-coverage") and not _fails(clean, "edge-shapes"), clean["findings"]
