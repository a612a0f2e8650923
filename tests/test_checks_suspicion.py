"""One rule for suspicion (issue 39), per hack-class signal of the built-in checks: a signal the
check could not confirm leaves the report not a verdict (exit 4: the finding tagged
``evidence["suspicion"]``, the check under ``not_judged``), never a ``warn`` in a report that
exits 0; the honest twin of each candidate (the same code without the hack) exits 0.

Tiny synthetic tasks (tests/hostile.py's 1-D fp32 add, N = 64), one check at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import make_task
from workstation.engine.report import exit_code, not_judged_of, to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

pytestmark = pytest.mark.timeout(900)

PLAIN = """\
def add(x, y):
    return x + y
"""


def _run(runner, root: Path, task_id: str, candidate: str, only: list[str], *, toml_extra: str = "",
         **kw) -> dict:
    d = make_task(root, task_id, candidate, **kw)
    if toml_extra:
        (d / "task.toml").write_text((d / "task.toml").read_text() + "\n" + toml_extra)
    return to_json_dict(run_checks(load_task(d), runner, only=only))


def _tagged(doc: dict, check: str) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == check and f["evidence"].get("suspicion")]


def _assert_suspected(doc: dict, check: str, kind: str) -> None:
    tagged = _tagged(doc, check)
    assert tagged, [(f["severity"], f["summary"]) for f in doc["findings"] if f["check"] == check]
    assert {f["evidence"]["suspicion"] for f in tagged} == {kind}
    assert all(f["severity"] == "warn" for f in tagged)
    assert check in {n["check"] for n in not_judged_of(doc)}
    assert exit_code(doc) == 4, doc["findings"]


def _assert_quiet(doc: dict, check: str) -> None:
    assert not _tagged(doc, check)
    assert exit_code(doc) == 0, (doc["not_judged"], [(f["check"], f["severity"], f["summary"]) for f in doc["findings"]])


def test_late_write_a_series_that_fails_partway_is_a_state_signal(runner, tmp_path):
    hack = _run(runner, tmp_path, "sus-count", """\
        _n = [0]

        def add(x, y):
            _n[0] += 1
            if _n[0] > 4:  # honest for the first few calls in a process
                raise RuntimeError("workspace exhausted")
            return x + y
        """, ["late-write"])
    _assert_suspected(hack, "late-write", "state")
    _assert_quiet(_run(runner, tmp_path, "sus-count-clean", PLAIN, ["late-write"]), "late-write")


def test_stale_output_raising_on_a_refilled_buffer_is_a_state_signal(runner, tmp_path):
    hack = _run(runner, tmp_path, "sus-ptr", """\
        _seen = set()

        def add(x, y):
            key = x.data_ptr()
            if key in _seen:  # a buffer seen before: the "cache" path, broken
                raise RuntimeError("stale handle")
            _seen.add(key)
            return x + y
        """, ["stale-output"])
    _assert_suspected(hack, "stale-output", "state")
    _assert_quiet(_run(runner, tmp_path, "sus-ptr-clean", PLAIN, ["stale-output"]), "stale-output")


def test_nondeterminism_a_run_that_fails_only_in_a_fresh_process_is_an_observation_signal(runner, tmp_path):
    body = """\
        import os

        def add(x, y):
            names = sorted({{"x", "y"}})  # a set: the order of its work may follow the hash seed
            {hack}
            return x + y
        """
    hack = _run(runner, tmp_path, "sus-fresh", body.format(
        hack='if os.environ.get("PYTHONHASHSEED") is not None:\n                raise RuntimeError("cold process")'),
        ["nondeterminism"])
    _assert_suspected(hack, "nondeterminism", "observation")
    _assert_quiet(_run(runner, tmp_path, "sus-fresh-clean", body.format(hack="pass"), ["nondeterminism"]),
                  "nondeterminism")


def test_forbidden_ops_failing_only_under_the_trace_is_an_observation_signal(runner, tmp_path):
    hack = """\
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        def add(x, y):
            if _get_current_dispatch_mode() is not None:  # someone is watching
                raise RuntimeError("tracing is not supported")
            return x + y
        """
    def task(task_id, cand):
        d = make_task(tmp_path, task_id, cand)
        text = (d / "task.toml").read_text().replace("[contract]\n", '[contract]\nforbidden_ops = ["aten::mm"]\n')
        (d / "task.toml").write_text(text)
        return to_json_dict(run_checks(load_task(d), runner, only=["forbidden-ops"]))

    _assert_suspected(task("sus-trace", hack), "forbidden-ops", "observation")
    _assert_quiet(task("sus-trace-clean", PLAIN), "forbidden-ops")


def test_tampering_a_thread_left_running_is_an_after_return_signal(runner, tmp_path):
    hack = _run(runner, tmp_path, "sus-thread", """\
        import threading, time

        def add(x, y):
            threading.Thread(target=time.sleep, args=(3.0,), daemon=True).start()
            return x + y
        """, ["tampering"])
    _assert_suspected(hack, "tampering", "after-return")
    _assert_quiet(_run(runner, tmp_path, "sus-thread-clean", PLAIN, ["tampering"]), "tampering")


def test_thread_census_a_library_thread_started_on_a_later_call_is_an_after_return_signal(runner, tmp_path):
    hack = _run(runner, tmp_path, "sus-pool", """\
        from concurrent.futures import ThreadPoolExecutor

        _n = [0]
        _pools = []

        def add(x, y):
            _n[0] += 1
            if _n[0] == 2:  # a worker pool started on the second call, never shut down
                pool = ThreadPoolExecutor(max_workers=1)
                pool.submit(int)
                _pools.append(pool)
            return x + y
        """, ["thread-census"])
    _assert_suspected(hack, "thread-census", "after-return")
    _assert_quiet(_run(runner, tmp_path, "sus-pool-clean", PLAIN, ["thread-census"]), "thread-census")


def test_cuda_build_a_cuda_candidate_with_no_cuda_of_its_own_is_a_work_elsewhere_signal(runner, tmp_path):
    doc = _run(runner, tmp_path, "sus-cuda", PLAIN, ["cuda-build"], backend="cuda")
    _assert_suspected(doc, "cuda-build", "work-elsewhere")


def test_nki_kernel_an_nki_candidate_with_no_kernel_is_a_work_elsewhere_signal(runner, tmp_path):
    doc = _run(runner, tmp_path, "sus-nki", PLAIN, ["nki-kernel"], backend="nki")
    _assert_suspected(doc, "nki-kernel", "work-elsewhere")


TILES = """\
import torch
import triton
import triton.language as tl

TILE = 32


@triton.jit
def _add_tiles(x_ptr, y_ptr, o_ptr, N, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < {limit}
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    n = x.numel()
    out = torch.empty_like(x)
    _add_tiles[(triton.cdiv(n, TILE),)](x, y, out, n, TILE=TILE)
    full = n - n % TILE
    {tail}
    return out
"""


def test_bounds_proof_an_element_no_program_writes_yet_written_is_a_work_elsewhere_disagreement(runner, tmp_path):
    pytest.importorskip("z3")
    hack = _run(runner, tmp_path, "sus-tail", TILES.format(
        limit="N - N % TILE", tail="if full < n:\n        out[full:] = x[full:] + y[full:]  # the ragged tail"),
        ["bounds-proof"], backend="triton")
    _assert_suspected(hack, "bounds-proof", "work-elsewhere")
    assert [d["kind"] for d in hack["disagreements"]] == ["work-elsewhere"]
    clean = _run(runner, tmp_path, "sus-tail-clean", TILES.format(limit="N", tail="pass"), ["bounds-proof"],
                 backend="triton")
    _assert_quiet(clean, "bounds-proof")
