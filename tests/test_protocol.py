"""The typed parent/child protocol (workstation.protocol.steps) and the one Triton launch
wrapper (workstation.harness.launches)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import typing

import msgspec
import pytest

from workstation.protocol.steps import (
    AuthorTestStep,
    CallStep,
    Job,
    Layout,
    Monitor,
    NumCallers,
    Step,
    StepError,
    Transform,
    TritonAotStep,
    Upcast,
    encode_job,
    kind_of,
    memo_key,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _job(*steps: object) -> Job:
    return Job(task_dir="/t", out_dir="/o", steps=list(steps))


def test_every_kind_is_snake_case_and_unique():
    for union in (Step, Transform, Monitor):
        kinds = [kind_of(t) for t in typing.get_args(union)]
        assert len(set(kinds)) == len(kinds)
        for k in kinds:
            assert k.isidentifier() and k == k.lower(), k


def test_a_misspelled_field_fails_in_the_parent():
    with pytest.raises(TypeError, match="monitor"):
        CallStep(role="candidate", case={}, monitor=[])
    with pytest.raises(TypeError):
        CallStep("candidate", {})  # fields are keyword-only


def test_encode_job_names_the_bad_step():
    ok = AuthorTestStep(case={"N": 4, "dtype": "float32"})
    with pytest.raises(StepError, match=r"step 1 \(call\).*\$\.steps\[1\]\.role"):
        encode_job(_job(ok, CallStep(role="candidat", case={})))
    with pytest.raises(StepError, match=r"step 0 \(call\).*transforms\[0\]\.kind"):
        encode_job(_job(CallStep(role="candidate", case={}, transforms=[Layout(kind="diagonal")])))
    with pytest.raises(StepError, match=r"step 0 \(call\): a field holds another type"):
        encode_job(_job(CallStep(role="candidate", case={}, transforms=[{"name": "upcast"}])))
    with pytest.raises(StepError, match=r"step 0 \(triton_aot\)"):
        encode_job(_job(TritonAotStep(cases=[], targets=[["cuda", 90, 32]])))  # a list where a tuple belongs
    with pytest.raises(StepError, match=r"step 0 \(call\).*cannot encode"):
        encode_job(_job(CallStep(role="candidate", case={"N": object()})))


def test_job_round_trips_and_memo_keys_ignore_dict_order():
    step = CallStep(role="reference", case={"N": 4, "dtype": "float32"}, seed=2,
                    transforms=[Upcast(), Layout(kind="expand", args=[0], materialize=True)],
                    monitors=[NumCallers(file="candidate.py")])
    job = _job(step)
    assert msgspec.json.decode(encode_job(job), type=Job) == job
    same = CallStep(role="reference", case={"dtype": "float32", "N": 4}, seed=2,
                    transforms=[Upcast(dtype="float64"), Layout(kind="expand", args=[0], materialize=True)],
                    monitors=[NumCallers(file="candidate.py")])
    assert memo_key(step) == memo_key(same)
    assert memo_key(step) != memo_key(CallStep(role="reference", case={"N": 4, "dtype": "float32"}, seed=3))


HANDLERS = """
import typing
import workstation.harness as h
from workstation.protocol.steps import Monitor, Step, Transform
h.load_plugins()
for union, reg in ((Step, h.STEPS), (Transform, h.TRANSFORMS), (Monitor, h.MONITORS)):
    missing = [t.__name__ for t in typing.get_args(union) if t not in reg]
    assert not missing, missing
print("OK")
"""


def test_every_kind_has_a_harness_handler():
    p = subprocess.run([sys.executable, "-c", HANDLERS], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TRITON_INTERPRET="1"))
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]


LAUNCHES = '''
import torch
import triton
import triton.language as tl

from workstation.harness.launches import LaunchObserver, launch_classes, observing


@triton.jit
def add_one(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


class Log(LaunchObserver):
    def __init__(self, name, events, fail=False):
        self.name, self.events, self.fail = name, events, fail

    def before(self, launch):
        self.events.append((self.name, "before", launch.name, tuple(launch.arg_names), launch.warmup))
        if self.fail:
            raise RuntimeError("injected")

    def after(self, launch, result, error):
        self.events.append((self.name, "after", type(error).__name__ if error else None))


original = {c: c.__dict__["run"] for c in launch_classes()}
unpatched = lambda: all(c.__dict__["run"] is f for c, f in original.items())
x = torch.zeros(8)
events = []
with observing(Log("a", events)):
    assert not unpatched()
    with observing(Log("b", events)):
        add_one[(1,)](x, N=8)
    add_one[(1,)](x, N=8)
    assert not unpatched()
assert unpatched()
b = ("add_one", ("x_ptr", "N"), False)
assert events == [("a", "before", *b), ("b", "before", *b), ("b", "after", None), ("a", "after", None),
                  ("a", "before", *b), ("a", "after", None)], events
assert float(x[0]) == 2.0

events.clear()
try:
    with observing(Log("a", events)), observing(Log("f", events, fail=True)), observing(Log("c", events)):
        add_one[(1,)](x, N=8)
except RuntimeError as e:
    assert str(e) == "injected"
else:
    raise AssertionError("the injected failure did not propagate")
assert events == [("a", "before", *b), ("f", "before", *b), ("a", "after", "RuntimeError")], events
assert float(x[0]) == 2.0  # the failed launch did not run
assert unpatched()  # undone on the exception too
print("OK")
'''


def test_launch_wrapper_nests_and_restores(tmp_path):
    script = tmp_path / "launches_check.py"  # a file: the interpreter reads the kernel's source
    script.write_text(textwrap.dedent(LAUNCHES))
    p = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=REPO))
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr[-3000:]
