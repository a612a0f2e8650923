"""unwritten-output, out-of-bounds, input-mutation, stale-output, nondeterminism: the
sample tasks each catches, the clean tasks they leave alone, and hostile synthetic
candidates written to tmp_path (CPU, Triton interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.hostile import findings, make_task, result
from workstation.engine.run import run_checks
from workstation.protocol import sentinels
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.guards import GuardedBuffer, GuardedCallExtra, OutputSource
from workstation.protocol.extras.monitors import Site
from workstation.task.format import load_task

MEMORY_CHECKS = ["unwritten-output", "out-of-bounds", "input-mutation", "stale-output", "nondeterminism"]
CLEAN = ["softmax-gen", "gemm-cuda2triton", "matmul-opt", "bias-gelu-fusion", "bench-honest"]


def sample(task_id: str):
    return load_task(SAMPLE_QUEUE / "tasks" / task_id)


@pytest.fixture(scope="module")
def reports(runner):
    cache = {}

    def get(task_id: str, only=tuple(MEMORY_CHECKS)):
        key = (task_id, tuple(only))
        if key not in cache:
            cache[key] = run_checks(sample(task_id), runner, only=list(only))
        return cache[key]

    return get


def check(runner, folder, *ids, seeds=(0, 1, 2)):
    return run_checks(load_task(folder), runner, only=list(ids), seeds=seeds)


# ----------------------------------------------------------------------------- sentinels


def test_poisons_are_nans_with_distinct_payloads_and_decode():
    for dt in ("float32", "float16", "bfloat16", "float64"):
        a, b = sentinels.poison_value(dt, "A"), sentinels.poison_value(dt, "B")
        assert np.isnan(a) and np.isnan(b)
        assert sentinels.poison_bits(dt, "A") != sentinels.poison_bits(dt, "B")
    assert sentinels.poison_value("int32", "A") == 0x5A5A5A5A
    assert sentinels.poison_value("int8", "B") == -61  # 0xC3 as int8
    assert sentinels.poison_bits("bool", "A") is None
    # fp8 e4m3fn decoding (OCP FP8): 0x38 = 1.0, 0x7E = 448, 0x7F = NaN
    vals = sentinels.decode(np.array([0x38, 0x7E, 0x7F], dtype=np.uint8), "float8_e4m3fn")
    assert vals[0] == 1.0 and vals[1] == 448.0 and np.isnan(vals[2])
    assert sentinels.guard_element("float16") == 0xA5A5


# ----------------------------------------------------------------------------- samples


def test_relu_unwritten_reports_the_unwritten_elements_in_both_scenarios(reports):
    res = reports("relu-unwritten")
    fails = findings(res, "unwritten-output", "fail")
    assert len(fails) == 3  # every declared case
    f = next(f for f in fails if f.evidence["case"]["M"] == 64 and f.evidence["case"]["N"] == 1024)
    ev = f.evidence
    # the elements where x <= 0 (seed 0): the store is predicated on x > 0
    assert ev["unwritten"] == 32851 and ev["elements"] == 65536
    assert ev["scenarios"]["fresh_process"]["unwritten"] == 32851
    assert ev["scenarios"]["after_reference"]["unwritten"] == 32851
    assert ev["reference_at_unwritten"]["zero"] == 32851
    assert ev["buffer"]["kind"] == "out_arg" and ev["buffer"]["index"] == 1
    assert "never written" in f.summary and "fresh process and after the reference ran" in f.summary
    assert "out_args input 1" in f.summary


def test_copy_cast_oob_reports_guard_elements_past_the_end(reports):
    res = reports("copy-cast-oob")
    fails = findings(res, "out-of-bounds", "fail")
    assert len(fails) == 1
    f = fails[0]
    per = {c["case"]["n"]: c for c in f.evidence["per_case"]}
    assert set(per) == {4093, 3070, 1023}  # the n that are not multiples of 8
    assert per[4093]["after"]["offsets"] == [1, 2, 3] and per[4093]["before"] is None
    assert per[3070]["after"]["changed"] == 2 and per[1023]["after"]["changed"] == 1
    assert per[4093]["after"]["values"] == [0.0, 0.0, 0.0]
    assert f.evidence["source"] == {"file": "candidate.py", "line": 28}  # its torch.empty
    assert "past the end" in f.summary and "output 0 (float16 [4093]" in f.summary
    # the compute-sanitizer part needs a GPU: an info finding with the reason
    san = [x for x in findings(res, "out-of-bounds", "info") if x.evidence.get("compute_sanitizer") == "skipped"]
    assert san and "no CUDA device" in san[0].evidence["reason"]


def test_softmax_inplace_scratch_mutates_its_logits(reports):
    res = reports("softmax-inplace-scratch")
    fails = findings(res, "input-mutation", "fail")
    assert len(fails) == 3
    f = next(f for f in fails if f.evidence["case"]["N"] == 2048)
    el = f.evidence["elements"][0]
    assert el["index"] == 0 and el["changed"] == el["elements"] == 8 * 2048
    lo, hi = el["after_range"]
    assert 0 < lo and hi <= 1.0  # exp(x - max) left in the logits
    assert f.evidence["seeds"] == [0, 1, 2]


def test_gemm_replay_cache_returns_the_first_result_after_an_inplace_update(reports):
    res = reports("gemm-replay-cache")
    fails = findings(res, "stale-output", "fail")
    assert fails
    ev = fails[0].evidence
    assert ev["equal_to_first_result"] == 1.0
    assert ev["facts"]["same_object_as_first"] == [0]
    assert ev["comparison"]["mismatched"] > 0.9 * ev["comparison"]["elements"]
    assert "replayed result" in fails[0].summary and "very tensor object" in fails[0].summary


def test_sum_splitk_nondet_differs_bitwise_between_calls(reports):
    res = reports("sum-splitk-nondet")
    fails = findings(res, "nondeterminism", "fail")
    assert len(fails) == 1
    diffs = fails[0].evidence["differences"]
    assert any("one process" in d["run"] for d in diffs)
    d = diffs[0]
    assert d["n"] > 0 and d["max_ulp"] >= 1 and d["max_abs"] < 1e-3


@pytest.mark.parametrize("task_id", CLEAN)
def test_clean_tasks_get_no_fail(task_id, reports):
    res = reports(task_id)
    bad = [f.summary for f in res.findings if f.severity in ("fail", "warn")]
    assert not bad, bad
    assert all(r.status in ("pass", "skip") for r in res.results), [(r.check, r.status, r.reason) for r in res.results]


# ----------------------------------------------------------------------------- synthetic


TAIL_UNWRITTEN = """\
import torch

def add(x, y):
    out = torch.empty_like(x)
    out[:-3] = x[:-3] + y[:-3]   # the last three elements are never written
    return out
"""


def test_unwritten_tail_of_a_fresh_allocation(runner, tmp_path):
    d = make_task(tmp_path, "tail", TAIL_UNWRITTEN)
    res = check(runner, d, "unwritten-output")
    (f,) = findings(res, "unwritten-output", "fail")
    assert f.evidence["unwritten"] == 3
    assert f.evidence["indices"] == [[61], [62], [63]]
    assert f.evidence["source"] == {"file": "candidate.py", "line": 4}
    assert f.evidence["buffer"]["op"] == "empty_like"


def test_unwritten_integer_output_uses_the_byte_sentinels(runner, tmp_path):
    d = make_task(tmp_path, "tail-int", TAIL_UNWRITTEN, cases=[{"N": 64, "dtype": "int32"}], atol=0, rtol=0)
    res = check(runner, d, "unwritten-output")
    (f,) = findings(res, "unwritten-output", "fail")
    assert f.evidence["unwritten"] == 3
    assert f.evidence["scenarios"]["fresh_process"]["poison_bits"] == hex(0x5A5A5A5A)
    assert f.evidence["scenarios"]["after_reference"]["poison_bits"] == hex(0xC3C3C3C3)
    assert "NaN" not in f.summary


def test_fully_written_output_passes_with_an_info(runner, tmp_path):
    d = make_task(tmp_path, "full", "import torch\n\ndef add(x, y):\n    out = torch.empty_like(x)\n"
                  "    torch.add(x, y, out=out)\n    return out\n")
    res = check(runner, d, "unwritten-output", "out-of-bounds")
    assert result(res, "unwritten-output").status == "pass"
    assert result(res, "out-of-bounds").status == "pass"
    assert "every element written" in findings(res, "unwritten-output", "info")[0].summary


OOB_INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["N"], generator=g)
    # the caller's output is a slice of a larger buffer (the next shard follows it)
    out = torch.zeros(case["N"] + 16)[: case["N"]]
    return x.to(device), out.to(device)
"""

OOB_CANDIDATE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, n_store, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * 2.0, mask=offs < n_store)   # rounded-up store extent


def double(x, out):
    n = x.numel()
    _copy[(triton.cdiv(n, 16),)](x, out, n, triton.cdiv(n, 4) * 4, BLOCK=16)
"""

OOB_REFERENCE = """\
def double(x, out):
    out.copy_(x * 2.0)
"""


def test_out_of_bounds_write_past_an_out_args_buffer(runner, tmp_path):
    d = make_task(tmp_path, "oob", OOB_CANDIDATE, reference=OOB_REFERENCE, inputs=OOB_INPUTS, entry="double",
                  backend="triton", cases=[{"N": 61, "dtype": "float32"}, {"N": 64, "dtype": "float32"}],
                  entry_extra="out_args = [1]")
    res = check(runner, d, "out-of-bounds", "unwritten-output")
    (f,) = findings(res, "out-of-bounds", "fail")
    (c,) = f.evidence["per_case"]
    assert c["case"]["N"] == 61 and c["after"]["offsets"] == [1, 2, 3] and c["before"] is None
    assert f.evidence["buffer"]["kind"] == "out_arg"
    assert result(res, "unwritten-output").status == "pass"  # the out_arg itself is fully written


# -- input-mutation


def test_input_mutation_of_a_readonly_input(runner, tmp_path):
    d = make_task(tmp_path, "mut", "def add(x, y):\n    y[5] = 0.0\n    return x + y.clone().fill_(0) + y\n")
    res = check(runner, d, "input-mutation")
    (f,) = findings(res, "input-mutation", "fail")
    el = f.evidence["elements"][0]
    assert el["index"] == 1 and el["changed"] == 1 and el["indices"] == [[5]]
    assert el["sample"][0][2] == 0.0


def test_input_mutation_skips_inout_args_and_contracts_that_allow_it(runner, tmp_path):
    inplace = "def add(x, y):\n    x.add_(y)\n"
    ref = "def add(x, y):\n    x.add_(y)\n"
    d = make_task(tmp_path, "inout", inplace, reference=ref, entry_extra="inout_args = [0]")
    res = check(runner, d, "input-mutation")
    assert result(res, "input-mutation").status == "pass"
    d2 = make_task(tmp_path, "allowed", "def add(x, y):\n    x.add_(y)\n    return x\n", mutates_inputs=True)
    r2 = result(check(runner, d2, "input-mutation"), "input-mutation")
    assert r2.status == "skip" and "mutates_inputs = true" in r2.reason


# -- stale-output

PTR_CACHE = """\
_cache = {}

def add(x, y):
    key = (x.data_ptr(), y.data_ptr(), x.shape)
    if key not in _cache:
        _cache[key] = (x, y, x + y)   # keeps x, y alive: no pointer reuse by other tensors
    return _cache[key][2]
"""

PERSISTENT_OUT = """\
import torch

_out = {}

def add(x, y):
    out = _out.setdefault((x.shape, x.dtype), torch.empty_like(x))
    torch.add(x, y, out=out)
    return out
"""


def test_stale_output_from_a_pointer_keyed_cache(runner, tmp_path):
    d = make_task(tmp_path, "ptrcache", PTR_CACHE)
    res = check(runner, d, "stale-output")
    (f,) = findings(res, "stale-output", "fail")
    assert f.evidence["equal_to_first_result"] == 1.0
    assert "refilled in place" in f.summary


def test_stale_output_persistent_buffer_overwrites_the_first_result(runner, tmp_path):
    d = make_task(tmp_path, "persist", PERSISTENT_OUT)
    res = check(runner, d, "stale-output")
    (f,) = findings(res, "stale-output", "fail")
    assert f.evidence["first_result_changed"] == 64  # the caller's first result now holds seed 1's sum
    assert "returned the very tensor object" in f.summary
    assert "comparison" not in f.evidence  # the values themselves are right


def test_stale_output_alias_of_an_input_and_expanded_views(runner, tmp_path):
    ident_ref = "def add(x, y):\n    return (x * 1.0) + (y * 0.0)\n"
    d = make_task(tmp_path, "alias", "def add(x, y):\n    return x.view(-1)\n", reference=ident_ref)
    (f,) = findings(check(runner, d, "stale-output"), "stale-output", "fail")
    assert f.evidence["facts"]["aliases_inputs"] == [0] and "shares storage with input" in f.summary
    rowsum_ref = "import torch\n\ndef add(x, y):\n    return (x + y).sum().reshape(1).repeat(8)\n"
    rowsum_cand = "import torch\n\ndef add(x, y):\n    return (x + y).sum().reshape(1).expand(8)\n"
    d2 = make_task(tmp_path, "expand", rowsum_cand, reference=rowsum_ref, atol=1e-4, rtol=1e-5)
    (f2,) = findings(check(runner, d2, "stale-output"), "stale-output", "fail")
    assert f2.evidence["facts"]["zero_stride_dims"] == [0] and "expanded view" in f2.summary


def test_fresh_results_pass_and_say_streams_were_not_examined_on_cpu(runner, tmp_path):
    d = make_task(tmp_path, "fresh", "def add(x, y):\n    return x + y\n")
    res = check(runner, d, "stale-output")
    (info,) = findings(res, "stale-output", "info")
    assert result(res, "stale-output").status == "pass"
    assert "not examined on the CPU" in info.summary and info.evidence["sync_examined"] is False


# -- nondeterminism

CALL_COUNTER = """\
_calls = [0]

def add(x, y):
    _calls[0] += 1
    return (x + y) + (1e-6 if _calls[0] % 2 == 0 else 0.0)   # every second call is off by 1e-6
"""

HASH_ORDER = """\
import torch

_SCALE = {"alpha": 1e8, "beta": 1.0, "gamma": -1e8, "delta": 3.0, "eps": 1e-3, "zeta": 7e7,
          "eta": -7e7, "theta": 5.0, "iota": 0.37, "kappa": -2.5}

def add(x, y):
    acc = torch.zeros_like(x)
    for name in set(_SCALE):          # str hashing: the order depends on PYTHONHASHSEED
        acc += x * _SCALE[name]
    return acc + y
"""

HASH_REFERENCE = """\
def add(x, y):
    return (x.double() * sum([1e8, 1.0, -1e8, 3.0, 1e-3, 7e7, -7e7, 5.0, 0.37, -2.5]) + y.double()).float()
"""


def test_nondeterminism_within_one_process(runner, tmp_path):
    d = make_task(tmp_path, "counter", CALL_COUNTER, atol=1e-5)
    (f,) = findings(check(runner, d, "nondeterminism"), "nondeterminism", "fail")
    assert any("one process" in x["run"] for x in f.evidence["differences"])
    # no set/hash site read in candidate.py: the fresh interpreter runs all the same (issue 39:
    # the hash seed reaches work in ways a static scan does not read)
    assert "no set/hash site read" in f.evidence["hash_seed"]
    assert any("fresh interpreter" in r for r in f.evidence["runs"])


def test_nondeterminism_across_hash_seeds_needs_a_fresh_interpreter(runner, tmp_path):
    d = make_task(tmp_path, "hashorder", HASH_ORDER, reference=HASH_REFERENCE, atol=200.0, rtol=1e-3)
    (f,) = findings(check(runner, d, "nondeterminism"), "nondeterminism", "fail")
    runs = {x["run"] for x in f.evidence["differences"]}
    # equal within the fork server's hash seed (in-process calls, forked children) ...
    assert all("fresh interpreter" in r for r in runs), runs
    assert "PYTHONHASHSEED=0" in f.summary
    assert f.evidence["hash_sites"][0]["line"] == 8  # for name in set(_SCALE)


#: the hash seed reaches the order through a dict keys view's set difference: no set display,
#: no set() and no hash() for a static scan to read.
HASH_ORDER_VIEWS = HASH_ORDER.replace("for name in set(_SCALE):", 'for name in _SCALE.keys() - {"zz": 0}.keys():')


def test_nondeterminism_across_hash_seeds_without_a_set_site_the_scan_reads(runner, tmp_path):
    assert "set(" not in HASH_ORDER_VIEWS.split("def add")[1]
    d = make_task(tmp_path, "hashviews", HASH_ORDER_VIEWS, reference=HASH_REFERENCE, atol=200.0, rtol=1e-3)
    fails = findings(check(runner, d, "nondeterminism"), "nondeterminism", "fail")
    assert fails, "a keys-view set difference orders a float sum by the hash seed"
    assert any("fresh interpreter" in x["run"] for x in fails[0].evidence["differences"])


def test_nondeterminism_skipped_where_the_contract_allows_it(runner, tmp_path):
    d = make_task(tmp_path, "nondet-ok", CALL_COUNTER, deterministic=False, atol=1e-5)
    r = result(check(runner, d, "nondeterminism"), "nondeterminism")
    assert r.status == "skip" and "deterministic = false" in r.reason


# -- helpers other checks reuse, and the parent-side judgement on constructed data


def test_mutated_inputs_and_describe_mutations_work_for_the_reference(runner, tmp_path):
    from workstation.checks.input_mutation import describe_mutations, mutated_inputs
    from workstation.engine.context import CheckContext

    ref = "def add(x, y):\n    x.add_(1.0)\n    return x + y - 1.0\n"
    d = make_task(tmp_path, "refmut", "def add(x, y):\n    return x + y\n", reference=ref, atol=1e-5)
    ctx = CheckContext(load_task(d), runner)
    case = ctx.cases[0]
    (out,) = ctx.reference([(case, 0)])
    assert [m["index"] for m in mutated_inputs(out)] == [0]
    assert mutated_inputs(out, {0}) == []
    (det,) = describe_mutations(ctx, "reference", case, 0, [0])
    assert det["changed"] == 64 and det["max_abs_change"] == pytest.approx(1.0)


def _outcome(values, dtype, *, arrays=None, extra=None):
    from workstation.engine.context import CallOutcome
    from workstation.protocol.wire import StepResult, TensorData

    v = np.asarray(values, dtype=np.int64 if dtype.startswith("int") else np.float64)
    td = TensorData(values=v, dtype=dtype, shape=v.shape, stride=(1,), storage_offset=0, meta={})
    st = StepResult(index=0, ok=True, error=None, outputs=[td], extra=extra or CallExtra(), arrays=arrays or {},
                    seconds=0.0)
    return CallOutcome(spec={}, step=st)


def test_output_that_depends_on_poisoned_scratch_is_a_fail(tmp_path):
    """An int accumulator from torch.empty: poison + sum is no longer the poison's bits,
    but differs from the reference while the plain run matches."""
    from workstation.checks.unwritten_output import UnwrittenOutput, poison_mask
    from workstation.engine.context import CheckContext

    d = make_task(tmp_path, "acc", TAIL_UNWRITTEN, cases=[{"N": 4, "dtype": "int32"}], atol=0, rtol=0)
    ctx = CheckContext(load_task(d), runner=None)
    case = ctx.cases[0]
    ref = _outcome([1, 2, 3, 4], "int32")
    plain = _outcome([1, 2, 3, 4], "int32")
    vals = [0x5A5A5A5A + v for v in (1, 2, 3, 4)]
    buf = GuardedBuffer(kind="allocation", index=0, dtype="int32", shape=[4], stride=[1], element_size=4, extent=4,
                        guard=0, poisoned=True, guarded=False, device="cpu", op="empty_like",
                        site=Site(file="candidate.py", line=4, function="add"))
    a = _outcome(vals, "int32", arrays={"bits0": np.array(vals, dtype=np.int32)},
                 extra=GuardedCallExtra(output_sources=[OutputSource(output=0, buffer=0)], buffers=[buf]))
    chk = UnwrittenOutput()
    masks = {"A": poison_mask(a, 0, "int32", "A")}
    assert not masks["A"].any()
    assert chk._unwritten(ctx, case, 0, 0, ref.outputs[0], {"A": a}, masks, buf) is None
    f = chk._reads_uninitialised(ctx, case, 0, 0, ref, {"A": a}, plain, buf)
    assert f is not None and f.severity == "fail"
    assert "never initialised" in f.summary and f.evidence["source"] == {"file": "candidate.py", "line": 4}
    # and no verdict when the plain run is wrong too (correctness reports that)
    assert chk._reads_uninitialised(ctx, case, 0, 0, ref, {"A": a}, _outcome([0, 0, 0, 0], "int32"), buf) is None


def test_sanitizer_step_says_why_it_does_not_run_on_the_cpu(runner, tmp_path):
    from workstation.checks.out_of_bounds import smallest_case
    from workstation.engine.context import CheckContext
    from workstation.protocol.steps import SanitizerCallStep

    d = make_task(tmp_path, "san", "def add(x, y):\n    return x + y\n",
                  cases=[{"N": 64, "dtype": "float32"}, {"N": 8, "dtype": "float32"}])
    ctx = CheckContext(load_task(d), runner)
    assert smallest_case(ctx.cases) == {"N": 8, "dtype": "float32"}
    (o,) = ctx.run_steps([SanitizerCallStep(role="candidate", case=ctx.cases[1], seed=0)])
    assert o.ok and o.step.extra.ran is False
    assert "no CUDA device" in o.step.extra.reason
