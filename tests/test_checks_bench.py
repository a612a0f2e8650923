"""benchmark-bias, speedup-claim and autotune: the sample tasks, synthetic benches read
statically, synthetic tasks timed and autotuned for real (CPU, Triton interpreter)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.timingkit import QUIET_MS, inject_quiet_timings
from workstation.checks.autotune import scan_autotune
from workstation.checks.benchmark_bias import analyse_trace
from workstation.checks.support.benchsource import scan_bench
from workstation.checks.support.static import source_kind
from workstation.engine.report import finite_json
from workstation.engine.run import run_checks
from workstation.task.format import load_task

TIMING_CHECKS = ["benchmark-bias", "speedup-claim"]


def sample(task_id: str):
    return load_task(SAMPLE_QUEUE / "tasks" / task_id)


def findings(res, check: str, severity: str | None = None):
    return [f for f in res.findings if f.check == check and (severity is None or f.severity == severity)]


def result(res, check: str):
    return next(r for r in res.results if r.check == check)


@pytest.fixture(scope="module")
def reports(runner):
    """Each sample task's results for the three checks, computed once per module; the
    timed tasks of :data:`QUIET_MS` judge injected quiet-machine timings."""
    cache = {}

    def get(task_id: str, only=("benchmark-bias", "speedup-claim", "autotune")):
        key = (task_id, tuple(only))
        if key not in cache:
            with pytest.MonkeyPatch.context() as mp:
                if task_id in QUIET_MS:
                    inject_quiet_timings(mp, QUIET_MS[task_id])
                cache[key] = run_checks(sample(task_id), runner, only=list(only))
        return cache[key]

    return get


# ----------------------------------------------------------------------------- samples


def test_bench_biased_fails_benchmark_bias_with_the_causes(reports):
    res = reports("bench-biased", TIMING_CHECKS)
    fails = findings(res, "benchmark-bias", "fail")
    kinds = {f.evidence["issue"]["kind"] for f in fails if "issue" in f.evidence}
    assert {"setup-in-timed-region", "aggregate-differs", "no-warmup", "fresh-inputs-one-side"} <= kinds
    setup = next(f for f in fails if f.evidence.get("issue", {}).get("kind") == "setup-in-timed-region")
    assert "x.clone()" in setup.summary and setup.evidence["source"] == {"file": "bench.py", "line": 39}
    # the author's numbers against kws's, decomposed from the trace of the author's run
    dyn = next(f for f in fails if "author" in f.evidence)
    assert dyn.evidence["author"]["ratio"] > dyn.evidence["kws"]["ratio_ci"][1]
    base = dyn.evidence["trace"]["baseline"]
    assert base["first_call_timed"] is True
    assert base["extra_work_per_interval"].get("Tensor.clone") == 2
    assert dyn.evidence["trace"]["candidate"]["first_call_timed"] is False
    assert "baseline" in dyn.evidence["explanation"]


def test_bench_biased_fails_speedup_claim_with_the_timing_panel_evidence(reports):
    res = reports("bench-biased", TIMING_CHECKS)
    fail = findings(res, "speedup-claim", "fail")
    assert fail, [f.summary for f in res.findings]
    t = fail[0].evidence["timing"]
    assert isinstance(t["device"], str) and t["device"].startswith("cpu")
    assert isinstance(t["protocol"], str) and "flush" in t["protocol"]
    assert t["representative"] is True and t["reason"] == ""
    assert t["claimed"] == 3.0 and t["ci_level"] == 0.95
    assert t["case"] == {"M": 2048, "N": 1024, "dtype": "float32"}
    lo, hi = t["ratio_ci"]
    assert lo <= t["ratio"] <= hi < 3.0 / 1.1
    for side in ("candidate", "baseline"):
        s = t["sides"][side]
        assert isinstance(s["samples_ms"], list) and 2 <= len(s["samples_ms"]) <= 500
        assert s["n"] == len(s["samples_ms"])
        for k in ("cold_ms", "warm_ms", "median_ms"):
            assert isinstance(s[k], float) and s[k] > 0
        q1, q3 = s["iqr_ms"]
        assert q1 <= s["median_ms"] <= q3
    # over PyTorch: the torch.compile side is reported beside it (or why it is not)
    assert any("torch.compile" in f.summary for f in findings(res, "speedup-claim"))
    # the panel shows every finding with timing evidence: exactly one per timed case
    assert [f.check for f in res.findings if "timing" in f.evidence] == ["speedup-claim"]
    json.dumps(finite_json(fail[0].evidence))  # JSON-ready


def test_bench_honest_passes_both(reports):
    res = reports("bench-honest", TIMING_CHECKS)
    for check in TIMING_CHECKS:
        bad = [f.summary for f in findings(res, check) if f.severity in ("fail", "warn")]
        assert not bad, bad
        assert result(res, check).status == "pass"
    claim = next(f for f in findings(res, "speedup-claim") if "timing" in f.evidence)
    assert claim.evidence["timing"]["representative"] is True


@pytest.mark.parametrize("task_id", ["bench-honest", "bench-biased"])
def test_a_busy_machine_never_turns_a_timing_verdict_into_a_pass(runner, task_id):
    """Steady figures read with half the samples descheduled (a loaded machine): a claim
    inside the measured interval is not judged (not "consistent": the measurement could not
    tell), and the biased task's fails stay fails: load moves checks to not judged, never to
    pass."""
    times = QUIET_MS[task_id]
    if task_id == "bench-honest":  # kws measures exactly the claimed 50x: "consistent" when quiet
        times = {**times, "kws": {**times["kws"], "baseline": 1.0}}
    with pytest.MonkeyPatch.context() as mp:
        inject_quiet_timings(mp, times, busy=0.5)
        res = run_checks(sample(task_id), runner, only=TIMING_CHECKS)
    claim = result(res, "speedup-claim")
    if task_id == "bench-honest":
        assert claim.status != "pass" and "too noisy" in claim.not_judged, (claim.status, claim.not_judged)
    else:
        assert claim.status == "fail" and result(res, "benchmark-bias").status == "fail"


def test_splitk_autotune_noreset_fails_autotune(reports):
    res = reports("splitk-autotune-noreset", ["autotune"])
    fail = findings(res, "autotune", "fail")
    assert len(fail) == 1, [f.summary for f in res.findings]
    ev = fail[0].evidence
    # 4 configs x 3 tuning launches (kws's interpreter benchmarker) + the call's own launch
    assert ev["scale"] == pytest.approx(13.0, rel=1e-3)
    assert ev["hazards"]["c_ptr"]["line"] == 61
    assert ev["source"] == {"file": "candidate.py", "line": 61}
    assert len(ev["cases"]) == 3
    assert "reset_to_zero" in fail[0].summary and "first call" in fail[0].summary
    info = findings(res, "autotune", "info")
    assert info and "declaration order" in info[0].summary


def test_matmul_opt_speedup_is_not_judged_under_the_interpreter(reports):
    res = reports("matmul-opt", TIMING_CHECKS)
    sc = result(res, "speedup-claim")
    assert sc.status == "skip" and "interpreter" in sc.reason and "not representative" in sc.reason
    assert not findings(res, "benchmark-bias", "fail")


# ----------------------------------------------------------------------------- source scan

BENCH_TOML = """\
schema = 1
id = "{id}"
title = "add"
kind = "optimization"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:add"
reference = "reference.py:add"
inputs = "inputs.py:make_inputs"
baseline = "baseline.py:add"
bench = "bench.py:run"

[[cases]]
N = 4096
dtype = "float32"

[tolerance]
atol = 1e-6
rtol = 1e-6

[claims]
speedup = {speedup}
"""

INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["N"], generator=g).to(getattr(torch, case["dtype"]))
    y = torch.randn(case["N"], generator=g).to(getattr(torch, case["dtype"]))
    return x.to(device), y.to(device)
"""

HEAD = """\
import time
import torch
import triton
from candidate import add as candidate
from baseline import add as baseline
from inputs import make_inputs
"""


def bench_task(root: Path, bench: str, task_id: str = "addb", speedup: float = 0.0,
               candidate: str = "def add(x, y):\n    return x + y\n",
               baseline: str = "def add(x, y):\n    return x + y\n") -> Path:
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(BENCH_TOML.format(id=task_id, speedup=speedup))
    (d / "spec.md").write_text("# add\n")
    (d / "candidate.py").write_text("import torch\n" + textwrap.dedent(candidate))
    (d / "baseline.py").write_text("import torch\n" + textwrap.dedent(baseline))
    (d / "reference.py").write_text("import torch\ndef add(x, y):\n    return x + y\n")
    (d / "inputs.py").write_text(INPUTS)
    (d / "bench.py").write_text(HEAD + textwrap.dedent(bench))
    return d


def line_of(path: Path, text: str, nth: int = -1) -> int:
    """1-based line of the ``nth`` line of ``path`` that contains ``text``."""
    hits = [i + 1 for i, ln in enumerate(path.read_text().splitlines()) if text in ln]
    return hits[nth]


def issues_of(root: Path, bench: str):
    """The scan's issues of a bench file, as a list."""
    _, issues = scan_bench(load_task(bench_task(root, bench)))
    return issues


def one(issues, kind: str, **match):
    """The single issue of ``kind`` (matching attributes ``match``)."""
    got = [i for i in issues if i.kind == kind and all(getattr(i, k) == v for k, v in match.items())]
    assert len(got) == 1, [(i.kind, i.sides, i.path) for i in issues]
    return got[0]


FAIR = """
def _time(fn, x, y, device):
    for _ in range(3):
        fn(x, y)
    ts = []
    for _ in range(20):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x, y)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[10] * 1e3

def run(case, device):
    x, y = make_inputs(case, device, 0)
    return {"candidate_ms": _time(candidate, x, y, device), "baseline_ms": _time(baseline, x, y, device)}
"""


def test_fair_bench_has_no_issue(tmp_path):
    assert issues_of(tmp_path, FAIR) == []


def test_missing_synchronize_on_the_cuda_path_of_one_side(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        for _ in range(3):
            candidate(x, y)
            baseline(x, y)
        t0 = time.perf_counter()
        candidate(x, y)
        torch.cuda.synchronize()
        c = time.perf_counter() - t0
        t0 = time.perf_counter()
        baseline(x, y)
        b = time.perf_counter() - t0
        return {"candidate_ms": c * 1e3, "baseline_ms": b * 1e3}
    """
    got = issues_of(tmp_path, bench)
    iss = one(got, "no-sync", sides=("baseline",), path="cuda")
    assert iss.asymmetric and iss.line == line_of(tmp_path / "tasks/addb/bench.py", "baseline(x, y)")
    assert not any(i.kind == "no-sync" and i.sides == ("candidate",) for i in got)


def test_cpu_only_clock_timing_needs_no_synchronize(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        if device.type == "cuda":
            c = triton.testing.do_bench(lambda: candidate(x, y))
            b = triton.testing.do_bench(lambda: baseline(x, y))
            return {"candidate_ms": c, "baseline_ms": b}
        candidate(x, y)
        baseline(x, y)
        t0 = time.perf_counter()
        candidate(x, y)
        c = time.perf_counter() - t0
        t0 = time.perf_counter()
        baseline(x, y)
        b = time.perf_counter() - t0
        return {"candidate_ms": c * 1e3, "baseline_ms": b * 1e3}
    """
    assert issues_of(tmp_path, bench) == []


def test_do_bench_on_one_side_only(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        c = triton.testing.do_bench(lambda: candidate(x, y))
        baseline(x, y)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        baseline(x, y)
        torch.cuda.synchronize()
        b = (time.perf_counter() - t0) * 1e3
        return {"candidate_ms": c, "baseline_ms": b}
    """
    got = issues_of(tmp_path, bench)
    one(got, "flush-one-side")
    iss = one(got, "do-bench-one-side")
    assert iss.asymmetric and iss.detail == {"candidate": "do_bench", "baseline": "clock"}


def test_flush_on_one_side_only(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        cache = torch.empty(64 * 2 ** 20, dtype=torch.int8, device=device)
        candidate(x, y)
        baseline(x, y)
        cs, bs = [], []
        for _ in range(10):
            cache.zero_()
            t0 = time.perf_counter()
            candidate(x, y)
            torch.cuda.synchronize()
            cs.append(time.perf_counter() - t0)
        for _ in range(10):
            t0 = time.perf_counter()
            baseline(x, y)
            torch.cuda.synchronize()
            bs.append(time.perf_counter() - t0)
        return {"candidate_ms": min(cs) * 1e3, "baseline_ms": min(bs) * 1e3}
    """
    iss = one(issues_of(tmp_path, bench), "flush-one-side")
    assert iss.asymmetric and "only the candidate's timed runs" in iss.message


def test_different_inputs_per_side(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        x16, y16 = x.half(), y.half()
        candidate(x16, y16)
        baseline(x, y)
        t0 = time.perf_counter()
        candidate(x16, y16)
        c = time.perf_counter() - t0
        t0 = time.perf_counter()
        baseline(x, y)
        b = time.perf_counter() - t0
        return {"candidate_ms": c * 1e3, "baseline_ms": b * 1e3}
    """
    iss = one(issues_of(tmp_path, bench), "inputs-differ")
    assert iss.detail["candidate_args"] == ["x16", "y16"] and iss.detail["baseline_args"] == ["x", "y"]
    assert iss.detail["assigned_at"]["x16"] == line_of(tmp_path / "tasks/addb/bench.py", "x16, y16 =")


def test_first_call_of_a_compiled_side_timed(tmp_path):
    bench = """
    def run(case, device):
        x, y = make_inputs(case, device, 0)
        fast = torch.compile(candidate)
        baseline(x, y)
        t0 = time.perf_counter()
        fast(x, y)
        c = time.perf_counter() - t0
        t0 = time.perf_counter()
        baseline(x, y)
        b = time.perf_counter() - t0
        return {"candidate_ms": c * 1e3, "baseline_ms": b * 1e3}
    """
    iss = one(issues_of(tmp_path, bench), "first-call-timed")
    assert iss.sides == ("candidate",) and iss.asymmetric and "torch.compile" in iss.message


def test_timing_utilities_used_against_their_docs(tmp_path):
    bench = """
    from torch.utils import benchmark

    def run(case, device):
        x, y = make_inputs(case, device, 0)
        c = triton.testing.do_bench(lambda: candidate(x, y)) * 1000
        m = benchmark.Timer(stmt="baseline(x, y)", globals={"baseline": baseline, "x": x, "y": y})
        b = m.blocked_autorange().raw_times[0]
        t0 = time.time()
        candidate(x, y)
        _ = time.time() - t0
        return {"candidate_ms": c, "baseline_ms": b}
    """
    msgs = [i.message for i in issues_of(tmp_path, bench) if i.kind == "timer-misuse"]
    assert any("already returns milliseconds" in m for m in msgs)
    assert any("raw_times" in m for m in msgs)
    assert any("time.time()" in m for m in msgs)


def test_sample_benches_read_statically():
    _, honest = scan_bench(sample("bench-honest"))
    _, opt = scan_bench(sample("matmul-opt"))
    assert honest == [] and opt == []
    assert source_kind(sample("matmul-opt"), "candidate") == "triton"
    assert source_kind(sample("bench-biased"), "baseline") == "pytorch"


def test_trace_pairs_clock_reads_by_the_scanned_lines():
    from workstation.checks.support.benchsource import TimedUse
    from workstation.protocol.extras.timing import BenchArg, BenchCCall, ClockRead, SideCall

    ms = 1_000_000
    events = [
        SideCall(side="candidate", t=0, t_end=5 * ms, args=[BenchArg(shape=[4], dtype="float32")]),
        ClockRead(t=10 * ms, line=20, in_bench=True),
        BenchCCall(name="Tensor.clone", t=11 * ms, line=21),
        SideCall(side="baseline", t=12 * ms, t_end=15 * ms, args=[BenchArg(shape=[8], dtype="float16")]),
        ClockRead(t=16 * ms, line=22, in_bench=True),
        ClockRead(t=20 * ms, line=30, in_bench=True),
        SideCall(side="candidate", t=21 * ms, t_end=22 * ms),
        ClockRead(t=23 * ms, line=31, in_bench=True),
    ]
    uses = [TimedUse("baseline", 21, "clock", clock_lines=(20, 22)),
            TimedUse("candidate", 30, "clock", clock_lines=(30, 31))]
    tr = analyse_trace(events, uses)
    b, c = tr["baseline"], tr["candidate"]
    assert b.intervals_ms == [6.0] and b.inside_ms == [3.0] and b.first_call_timed
    assert b.extra_work == {"Tensor.clone": 1}
    assert c.intervals_ms == [3.0] and not c.first_call_timed  # its first call ran before any clock
    assert c.calls_ms == [5.0, 1.0]
    assert b.args[0]["dtype"] == "float16"


# ----------------------------------------------------------------------------- timed synthetic


@pytest.fixture
def quick_timing(monkeypatch):
    """Small flush buffer and no torch.compile side: synthetic timing tests stay quick."""
    monkeypatch.setenv("KWS_LLC_BYTES", str(4 * 2 ** 20))
    monkeypatch.setenv("KWS_TORCH_COMPILE", "0")


SLOW_BASELINE = """\
def add(x, y):
    out = torch.empty_like(x)
    for i in range(0, x.numel(), 64):
        out[i:i + 64] = x[i:i + 64] + y[i:i + 64]
    return out
"""


@pytest.mark.parametrize("speedup, severity", [(1.0, "warn"), (1000.0, "fail")])
def test_speedup_claim_on_a_synthetic_torch_task(tmp_path, runner, quick_timing, speedup, severity):
    d = bench_task(tmp_path, FAIR, task_id=f"slowadd{int(speedup)}", speedup=speedup, baseline=SLOW_BASELINE)
    res = run_checks(load_task(d), runner, only=["speedup-claim"])
    fs = findings(res, "speedup-claim")
    main = next(f for f in fs if "verdict" in f.evidence)
    t = main.evidence["timing"]
    # 64 sliced adds per call against one vectorised add: several times faster, far from 1000x
    assert 4.0 < t["ratio"] < 500
    assert main.severity == severity
    position = "below" if speedup == 1.0 else "above"
    assert main.evidence["verdict"]["position"] == position
    assert "4.0 MiB" in t["protocol"] or "8 MiB" in t["protocol"]  # KWS_LLC_BYTES reached the child
    assert any("KWS_TORCH_COMPILE=0" in f.summary for f in fs)


def test_speedup_claim_skips_without_a_claim(tmp_path, runner):
    d = bench_task(tmp_path, FAIR, task_id="noclaim", speedup=0.0)
    res = run_checks(load_task(d), runner, only=["speedup-claim"])
    r = result(res, "speedup-claim")
    assert r.status == "skip" and "no speedup claim" in r.reason


# ----------------------------------------------------------------------------- autotune synthetic

AT_TOML = """\
schema = 1
id = "{id}"
title = "autotuned scale"
kind = "generation"
backend = "triton"
spec = "spec.md"

[entry]
candidate = "candidate.py:scale"
reference = "reference.py:scale"
inputs = "inputs.py:make_inputs"

[[cases]]
N = 200
dtype = "float32"

[tolerance]
atol = 1e-6
rtol = 1e-6
"""

AT_CANDIDATE = """\
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({{"BLOCK": 32}}), triton.Config({{"BLOCK": 64}}),
                          triton.Config({{"BLOCK": 128}})], key=["n"]{hooks})
@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    {body}


def scale(x):
    out = torch.zeros_like(x)
    _kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
"""


def at_task(root: Path, task_id: str, body: str, hooks: str = "") -> Path:
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(AT_TOML.format(id=task_id))
    (d / "spec.md").write_text("# out = 2 x\n")
    (d / "candidate.py").write_text(AT_CANDIDATE.format(body=body, hooks=hooks))
    (d / "reference.py").write_text("def scale(x):\n    return 2 * x\n")
    (d / "inputs.py").write_text(INPUTS.replace("return x.to(device), y.to(device)", "return (x.to(device),)"))
    return d


def test_autotune_config_that_disagrees_and_config_that_fails(tmp_path, runner):
    body = """y = 2 * x
    if BLOCK == 64:
        y = y + 1.0
    tl.static_assert(BLOCK <= 64)
    tl.store(out_ptr + offs, y, mask=mask)"""
    res = run_checks(load_task(at_task(tmp_path, "atbad", body)), runner, only=["autotune"])
    fs = findings(res, "autotune")
    wrong = [f for f in fs if f.severity == "fail" and "config 1" in f.summary]
    assert wrong and wrong[0].evidence["config"]["kwargs"] == {"BLOCK": 64}
    raised = [f for f in fs if f.severity == "warn" and "raise" in f.summary]
    assert raised and raised[0].evidence["failing"][0]["config"]["kwargs"] == {"BLOCK": 128}


def test_autotune_accumulating_kernel_with_reset_to_zero_is_clean(tmp_path, runner):
    body = "tl.atomic_add(out_ptr + offs, 2 * x, mask=mask)"
    d = at_task(tmp_path, "atreset", body, hooks=', reset_to_zero=["out_ptr"]')
    ks = scan_autotune(load_task(d))
    assert ks[0].atomics["out_ptr"][1] == "atomic_add" and ks[0].hazards() == {}
    res = run_checks(load_task(d), runner, only=["autotune"])
    assert not [f.summary for f in findings(res, "autotune") if f.severity != "info"]


def test_autotune_accumulating_kernel_without_reset_fails(tmp_path, runner):
    body = "tl.atomic_add(out_ptr + offs, 2 * x, mask=mask)"
    d = at_task(tmp_path, "atnoreset", body)
    assert "out_ptr" in scan_autotune(load_task(d))[0].hazards()
    res = run_checks(load_task(d), runner, only=["autotune"])
    fail = findings(res, "autotune", "fail")
    assert fail and fail[0].evidence["scale"] == pytest.approx(10.0)  # 3 configs x 3 + 1
    assert fail[0].evidence["source"] == {"file": "candidate.py", "line": line_of(d / "candidate.py", "atomic_add")}


def test_autotune_skips_a_candidate_without_autotuner(runner):
    res = run_checks(sample("softmax-gen"), runner, only=["autotune"])
    r = result(res, "autotune")
    assert r.status == "skip" and "no autotuned kernel" in r.reason


LAZY_BASELINE = """\
import time

_READY = []


def add(x, y):
    if not _READY:  # a one-off cost on the first call: lazy initialisation, a JIT compile
        time.sleep(0.05)
        _READY.append(True)
    return x + y
"""

FIRST_CALL_BENCH = """
def run(case, device):
    x, y = make_inputs(case, device, 0)
    for _ in range(5):
        candidate(x, y)
    cs = []
    for _ in range(20):
        t0 = time.perf_counter()
        candidate(x, y)
        cs.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    baseline(x, y)
    b = time.perf_counter() - t0
    return {"candidate_ms": sorted(cs)[10] * 1e3, "baseline_ms": b * 1e3}
"""


def test_benchmark_bias_names_a_timed_first_call(tmp_path, runner, quick_timing):
    d = bench_task(tmp_path, FIRST_CALL_BENCH, task_id="lazyfirst", baseline=LAZY_BASELINE)
    res = run_checks(load_task(d), runner, only=["benchmark-bias"])
    fails = findings(res, "benchmark-bias", "fail")
    static = [f for f in fails if f.evidence.get("issue", {}).get("kind") == "first-call-timed"]
    assert static and static[0].evidence["issue"]["sides"] == ["baseline"]
    dyn = next(f for f in fails if "author" in f.evidence)
    assert "the author's baseline_ms includes the first call: kws's cold first-call time" in dyn.summary
    assert dyn.evidence["explanation"]["baseline"]["kws_first_call_ms"] > 40
    assert "timing" in dyn.evidence  # no claim: this finding carries the timing panel's evidence
