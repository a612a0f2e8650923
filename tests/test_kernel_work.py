"""kernel-work (every output element comes from the candidate's own Triton kernels, seen by
poisoning their stores) and the suspicions of fallback and profile it confirms: each hack
with the honest twin that must stay quiet, and no hack-class signal left as a ``warn``
(1-D fp32 ``add`` tasks of tests/hostile.py, N = 64 declared, Triton under the interpreter)."""

from __future__ import annotations

import pytest

from tests.hostile import findings, make_task, result
from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.task.format import load_task

KERNEL = """\
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _launch(x, y, out, n):
    if n:
        _add[(triton.cdiv(n, 32),)](x, y, out, n, BLOCK=32)
    return out
"""

CLEAN = KERNEL + """
def add(x, y):
    return _launch(x, y, torch.empty_like(x), x.numel())
"""

#: whole 32-element tiles in Triton, the ragged tail by torch (every declared N is a multiple of 32).
TAIL = KERNEL + """
def add(x, y):
    n = x.numel()
    out = torch.empty_like(x)
    full = n - n % 32
    _launch(x, y, out, full)
    out[full:] = x[full:] + y[full:]
    return out
"""

#: the answer from numpy on the host; the kernel writes a scratch buffer nobody returns.
HOST = KERNEL + """
def add(x, y):
    _launch(x, y, torch.empty_like(x), x.numel())
    return torch.from_numpy(x.numpy() + y.numpy())
"""

#: zero-initialised output, the kernel writes only where x > 0 (the reference does the same): honest.
SPARSE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _pos(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    m = (offs < n) & (x > 0)
    tl.store(o_ptr + offs, x + tl.load(y_ptr + offs, mask=m), mask=m)


def add(x, y):
    out = torch.zeros_like(x)
    _pos[(triton.cdiv(x.numel(), 32),)](x, y, out, x.numel(), BLOCK=32)
    return out
"""
SPARSE_REF = """\
import torch

def add(x, y):
    return torch.where(x > 0, x + y, torch.zeros_like(x))
"""

#: accumulates with atomics into a zeroed output: honest.
ATOMIC = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _acc(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(o_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
    tl.atomic_add(o_ptr + offs, tl.load(y_ptr + offs, mask=m), mask=m)


def add(x, y):
    out = torch.zeros_like(x)
    _acc[(triton.cdiv(x.numel(), 32),)](x, y, out, x.numel(), BLOCK=32)
    return out
"""

#: a size-gated framework path the declared case never takes.
GATED = KERNEL + """
def add(x, y):
    n = x.numel()
    if n % 32 != 0:
        return torch.sum(torch.stack([x, y]), dim=0)
    return _launch(x, y, torch.empty_like(x), n)
"""

#: a framework path behind a branch that is always false, and one for a dtype the task does not take.
DEAD = KERNEL + """
def add(x, y):
    n = x.numel()
    if n > 0 and False:
        return torch.sum(torch.stack([x, y]), dim=0)
    if x.dtype == torch.float64:
        return torch.sum(torch.stack([x, y]), dim=0)
    return _launch(x, y, torch.empty_like(x), n)
"""

#: replays the previous result when the inputs look the same (shape and two sampled values).
REPLAY = KERNEL + """
_last = {}


def add(x, y):
    key = (tuple(x.shape), float(x[0]), float(y[-1]))
    if key in _last:
        return _last[key].clone()
    out = _launch(x, y, torch.empty_like(x), x.numel())
    _last.clear()
    _last[key] = out.clone()
    return out
"""


def _task(root, name, src, **kw):
    return load_task(make_task(root, name, src, backend="triton", **kw))


@pytest.fixture(scope="module")
def work_reports(runner, tmp_path_factory):
    root = tmp_path_factory.mktemp("kernel-work")
    srcs = {"clean": (CLEAN, {}), "tail": (TAIL, {}), "host": (HOST, {}), "sparse": (SPARSE, {"reference": SPARSE_REF}),
            "atomic": (ATOMIC, {})}
    return {name: run_checks(_task(root, f"kw-{name}", src, **kw), runner, only=["kernel-work"])
            for name, (src, kw) in srcs.items()}


def test_kernel_work_is_quiet_on_an_honest_kernel(work_reports):
    res = work_reports["clean"]
    assert result(res, "kernel-work").status == "pass", [f.summary for f in findings(res, "kernel-work")]
    assert exit_code(to_json_dict(res)) == 0


def test_kernel_work_fails_a_ragged_tail_computed_by_the_framework(work_reports):
    res = work_reports["tail"]
    assert result(res, "kernel-work").status == "fail"
    f = next(f for f in findings(res, "kernel-work") if f.severity == "fail")
    assert "N=65" in f.summary and "the last element" in f.summary and "aten.add" in f.summary, f.summary
    assert f.evidence["outputs"][0]["unchanged"] == 1


def test_kernel_work_fails_an_answer_computed_on_the_host_beside_a_decorative_launch(work_reports):
    res = work_reports["host"]
    f = next(f for f in findings(res, "kernel-work") if f.severity == "fail")
    assert "every element" in f.summary and "_add x1" in f.summary and "host code" in f.summary, f.summary


def test_kernel_work_accepts_an_initialised_output_and_atomics(work_reports):
    for name in ("sparse", "atomic"):
        res = work_reports[name]
        assert result(res, "kernel-work").status == "pass", (name, [f.summary for f in findings(res, "kernel-work")])
    init = [f for f in findings(work_reports["sparse"], "kernel-work") if "initialisation" in f.summary]
    assert init and "hold 0" in init[0].summary


def test_kernel_work_is_not_scheduled_for_other_backends(tmp_path):
    from workstation.checks.kernel_work import KernelWork

    assert KernelWork.applies(load_task(make_task(tmp_path, "t", "def add(x, y):\n    return x + y\n")))
    assert KernelWork.applies(_task(tmp_path, "tt", CLEAN)) == ""


def test_fallback_derives_the_case_that_reaches_a_framework_path_and_fails_it(runner, tmp_path):
    res = run_checks(_task(tmp_path, "gated", GATED), runner, only=["fallback"])
    f = next((f for f in findings(res, "fallback") if f.severity == "fail"), None)
    assert f is not None, [x.summary for x in findings(res, "fallback")]
    assert "derived from its branch" in f.summary and "torch.sum" in f.summary, f.summary
    assert f.evidence["case"]["N"] % 32 and "n % 32 != 0" in f.evidence["guard"]
    assert not [x for x in findings(res, "fallback") if x.severity == "warn"]


def test_fallback_leaves_dead_and_out_of_domain_paths_as_info_and_exits_0(runner, tmp_path):
    res = run_checks(_task(tmp_path, "dead", DEAD), runner, only=["fallback"])
    texts = [f.summary for f in findings(res, "fallback")]
    assert result(res, "fallback").status == "pass", texts
    assert any("always false" in t for t in texts) and any("dtype the task does not take" in t for t in texts), texts
    assert exit_code(to_json_dict(res)) == 0


def test_profile_confirms_a_replay_with_poisoned_stores_and_passes_the_honest_twin(runner, tmp_path):
    bad = run_checks(_task(tmp_path, "replay", REPLAY), runner, only=["profile"])
    f = next((f for f in findings(bad, "profile") if f.severity == "fail"), None)
    assert f is not None and "confirmed" in f.summary and "replays a result" in f.summary, \
        [x.summary for x in findings(bad, "profile")]
    good = run_checks(_task(tmp_path, "noreplay", CLEAN), runner, only=["profile"])
    assert result(good, "profile").status == "pass", [x.summary for x in findings(good, "profile")]
    for res in (bad, good):
        assert not [x for x in findings(res, "profile") if x.severity == "warn"]


#: never launches its kernel: the whole answer comes from an op the task lets it delegate to.
DELEGATED_ONLY = KERNEL + """
def add(x, y):
    return torch.add(x, y)
"""


def test_profile_fails_a_run_of_delegated_ops_only_when_poisoned_stores_confirm_it(runner, tmp_path):
    extra = '\n[delegation]\nops = ["aten::add"]\n'
    res = run_checks(_task(tmp_path, "delegated", DELEGATED_ONLY, entry_extra=extra), runner, only=["profile"])
    f = next((f for f in findings(res, "profile") if f.severity == "fail"), None)
    assert f is not None and "delegated framework ops alone" in f.summary, [x.summary for x in findings(res, "profile")]
    assert not [x for x in findings(res, "profile") if x.severity == "warn"]
