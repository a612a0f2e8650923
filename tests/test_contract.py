"""A declared accuracy contract (``[contract] compute_dtype`` / ``accumulate``, a kws
extension; docs/task-format.md, docs/numerics.md "Declared accuracy contracts"): the schema,
the contract oracle's dispatch mode, and special-values / precision-regime judging a kernel
that computes its logits at the input dtype by design."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TASK_TOML, write_task
from tests.test_checks_shapes import check, fails
from workstation.checks.support.contract import CONTRACT_MARGIN, max_err, within
from workstation.schema.problem import Problem
from workstation.task.format import load_task

BASE = TASK_TOML.format(id="add", status="pass", failure_class="")

# -- schema (no task code) ------------------------------------------------------------------------


def test_contract_parses_and_resolves_the_input_dtype(tmp_path):
    t = load_task(write_task(tmp_path, toml=BASE + '\n[contract]\ncompute_dtype = "input"\n'))
    acc = t.extensions.accuracy
    assert acc is not None and acc.accumulate == "float32"
    assert acc.compute_for("float16") == "float16" and acc.compute_for("float64") == "float32"
    assert acc.describe("bfloat16") == "compute at bfloat16 (the input dtype), accumulate in float32"
    t2 = load_task(write_task(tmp_path / "b", toml=BASE + '\n[contract]\ncompute_dtype = "bfloat16"\n'
                                                          'accumulate = "input"\n'))
    assert t2.extensions.accuracy.accumulate_for("float32") == "bfloat16"
    assert load_task(write_task(tmp_path / "c")).extensions.accuracy is None  # absent: judged as before


@pytest.mark.parametrize("extra,key,problem", [
    ('compute_dtype = "fp16"', "contract.compute_dtype", "unknown value 'fp16'"),
    ('compute_dtype = "float16"\naccumulate = "float64"', "contract.accumulate", "unknown value 'float64'"),
    ('accumulate = "input"', "contract.accumulate", "contract.compute_dtype is not given"),
    ("compute_dtype = 16", "contract.compute_dtype", ""),
])
def test_bad_contract_values_are_problems_naming_file_and_key(tmp_path, extra, key, problem):
    d = write_task(tmp_path, toml=BASE + f"\n[contract]\n{extra}\n")
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert ei.value.key == key and problem in ei.value.problem
    assert str(ei.value).startswith(str(d / "task.toml"))


def test_within_the_contract_is_margin_times_its_error_plus_floor():
    ce = {"contract_err": 0.01}
    assert within(0.02, ce, 0.0)[0] and not within(0.021, ce, 0.0)[0]
    assert within(0.021, ce, 0.01) == (True, CONTRACT_MARGIN * 0.01 + 0.01)
    assert not within(float("nan"), ce, 1.0)[0]
    assert max_err(np.array([1.0, np.inf, 3.0]), np.array([1.5, 2.0, 3.0])) == (0.5, 1)


# -- the contract oracle's dispatch mode (in process, no task code) --------------------------------


def test_contract_round_rounds_each_op_and_emulates_low_precision_accumulation():
    torch = pytest.importorskip("torch")
    import msgspec

    from workstation.harness.contract import _contract_round
    from workstation.protocol.extras.monitors import ContractRoundReport
    from workstation.protocol.steps import ContractRound

    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 256, generator=g, dtype=torch.float64)
    b = torch.randn(256, 8, generator=g, dtype=torch.float64)
    exact = a @ b

    def under(compute, acc):
        rep = ContractRoundReport()
        with _contract_round(None, ContractRound(compute=compute, accumulate=acc), rep):
            out = (a.float() @ b.float(), a.sum(-1), a.mean(dim=1, keepdim=True))
        return out, msgspec.to_builtins(rep)

    (m32, s32, mean32), rep = under("float16", "float32")
    assert m32.dtype == torch.float64 and rep["kept"]  # the reference's .float() stays float64
    # every op's result is rounded, the .float() casts included (operands at fp16); with fp32
    # accumulation the matmul itself rounds only its result
    assert torch.equal(m32, (a.half().double() @ b.half().double()).half().double())
    assert mean32.shape == (8, 1)
    (m16, s16, _), rep16 = under("float16", "float16")
    assert {"mm", "sum", "mean"} <= set(rep16["accumulated"])
    err32, err16 = float((m32 - exact).abs().max()), float((m16 - exact).abs().max())
    assert err16 > 2 * err32  # partial sums rounded to fp16 lose more than one final rounding
    (m, _, _), _ = under("float32", "float32")
    assert float((m - exact).abs().max()) < 1e-4


# -- special-values and precision-regime on a kernel computing its logits at fp16 ------------------

TOML = """\
schema = 1
id = "{id}"
title = "softmax of scaled logits, fp16 inputs, fp32 probabilities"
kind = "generation"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:softmax"
reference = "reference.py:softmax"
inputs = "inputs.py:make_inputs"

[params]
M = {{ min = 1, max = 4096 }}
N = {{ min = 1, max = 4096 }}

[contract]
reduction = ["N"]
{contract}

[[cases]]
M = 8
N = 64
dtype = "float16"

[tolerance]
atol = 1e-3
rtol = 5e-2
"""
INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    return (torch.randn(case["M"], case["N"], generator=g).to(dt).to(device),)
"""
REFERENCE = """\
import torch

def softmax(x):
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.softmax(x.to(acc) * 3.0, -1)
"""
FP16_LOGITS = """\
import torch

def softmax(x):
    # the logits at the input dtype, by design; the softmax in fp32
    return torch.softmax((x * 3.0).float(), -1)
"""
BF16_LOGITS = """\
import torch

def softmax(x):
    # logits rounded to bfloat16: 8 mantissa bits where the contract promises fp16's 11
    return torch.softmax((x.float() * 3.0).to(torch.bfloat16).float(), -1)
"""
CONTRACT = 'compute_dtype = "input"'


def _task(root: Path, tid: str, cand: str, contract: str = "") -> Path:
    d = write_task(root, tid, candidate=cand, toml=TOML.format(id=tid, contract=contract))
    (d / "inputs.py").write_text(INPUTS)
    (d / "reference.py").write_text(REFERENCE)
    return d


def test_fp16_logits_fail_without_the_contract_and_pass_with_it(runner, tmp_path):
    plain = _task(tmp_path, "plain", FP16_LOGITS)
    sv, pr = check(runner, plain, "special-values"), check(runner, plain, "precision-regime")
    assert sv["status"] == "fail" and any("float64 oracle" in f["summary"] for f in fails(sv))
    assert pr["status"] == "fail" and any("less accurate" in f["summary"] for f in fails(pr))

    declared = _task(tmp_path, "declared", FP16_LOGITS, CONTRACT)
    sv, pr = check(runner, declared, "special-values"), check(runner, declared, "precision-regime")
    assert sv["status"] == "pass" and not fails(sv), [f["summary"] for f in fails(sv)]
    assert pr["status"] == "pass" and not fails(pr), [f["summary"] for f in fails(pr)]
    for res in (sv, pr):
        infos = [f["summary"] for f in res["findings"] if f["severity"] == "info"]
        assert any("from fp32" in s and "compute at the input dtype, accumulate in float32" in s for s in infos)
        assert any("under the declared contract (compute at float16 (the input dtype), accumulate in float32) "
                   "the reference itself is off the float64 oracle by" in s and "the candidate by" in s
                   for s in infos), infos


def test_a_candidate_much_worse_than_its_contract_still_fails(runner, tmp_path):
    d = _task(tmp_path, "bf16", BF16_LOGITS, CONTRACT)
    for cid in ("special-values", "precision-regime"):
        res = check(runner, d, cid)
        fs = fails(res)
        assert fs and any("worse than the declared contract" in f["summary"] for f in fs), [f["summary"] for f in fs]
        ev = next(f["evidence"] for f in fs if "worse than the declared contract" in f["summary"])
        figures = ev["oracle"]["contract"] if cid == "special-values" else ev["contract"]
        assert figures["candidate_err"] > figures["limit"] > figures["contract_err"] > 0


WRONG_TEMPERATURE = """\
import torch

def softmax(x):
    # a different temperature (2.99 for 3): a different function, not a less precise one
    return torch.softmax((x * 2.99).float(), -1)
"""


def test_a_different_function_still_fails_under_the_contract(runner, tmp_path):
    d = _task(tmp_path, "wrong", WRONG_TEMPERATURE, CONTRACT)
    res = check(runner, d, "precision-regime")
    fs = fails(res)
    assert fs, [f["summary"] for f in res["findings"]]
    ev = fs[0]["evidence"]["contract"]
    assert ev["candidate_err"] > ev["limit"] and "declared contract" in fs[0]["summary"]
