"""fallback and tampering: the sample tasks each catches, the clean tasks they leave
alone, the static scans, and hostile synthetic candidates (CPU, Triton interpreter)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.hostile import findings, make_task, result
from workstation.checks.support.static import scan_fallback, scan_state_writes
from workstation.engine.run import run_checks
from workstation.task.format import load_task
from workstation.task.sources import TaskSources

STATE_CHECKS = ["fallback", "tampering"]
CLEAN = ["softmax-gen", "gemm-cuda2triton", "matmul-opt", "bias-gelu-fusion", "bench-honest"]


def sample(task_id: str):
    return load_task(SAMPLE_QUEUE / "tasks" / task_id)


@pytest.fixture(scope="module")
def reports(runner):
    cache = {}

    def get(task_id: str):
        if task_id not in cache:
            cache[task_id] = run_checks(sample(task_id), runner, only=STATE_CHECKS)
        return cache[task_id]

    return get


def check(runner, folder, *ids):
    return run_checks(load_task(folder), runner, only=list(ids))


def line_of(source: str, needle: str) -> int:
    """1-based line of the first line of ``source`` containing ``needle``."""
    return next(i for i, ln in enumerate(source.splitlines(), 1) if needle in ln)


# ----------------------------------------------------------------------------- samples


def test_linear_relu_fallback_is_caught_statically_and_dynamically(reports):
    res = reports("linear-relu-fallback")
    fails = findings(res, "fallback", "fail")
    dyn = next(f for f in fails if "completed no Triton kernel launch" in f.summary)
    assert "aten.addmm" in dyn.summary and "arange's arguments must be of type tl.constexpr" in dyn.summary
    assert dyn.evidence["source"] == {"file": "candidate.py", "line": 59}  # the except handler
    assert dyn.evidence["triton_launches"] == 0 and dyn.evidence["failed_launches"] == 1
    inj = next(f for f in fails if "with every Triton launch failing" in f.summary)
    assert inj.evidence["within_tolerance"] is True
    assert "addmm" in inj.evidence["fallback_ops"]
    exc = [h for h in dyn.evidence["static_hits"] if h["kind"] == "except-fallback"]
    assert exc and exc[0]["line"] == 59 and exc[0]["try_line"] == 57


def test_gelu_tamper_flags_the_precision_knobs_with_their_lines(reports):
    res = reports("gelu-tamper")
    (f,) = findings(res, "tampering", "fail")
    keys = {c["key"]: c for c in f.evidence["changes"]}
    assert keys["torch.get_float32_matmul_precision()"]["before"] == "'highest'"
    assert keys["torch.get_float32_matmul_precision()"]["after"] == "'high'"
    assert keys["torch.backends.cuda.matmul.allow_tf32"]["after"] == "True"
    assert keys["torch.backends.cuda.matmul.allow_tf32"]["source"]["line"] == 9
    assert keys["torch.get_float32_matmul_precision()"]["source"]["line"] == 8
    assert all(c["phase"] == "import" for c in f.evidence["changes"])
    assert f.evidence["source"]["file"] == "candidate.py"
    assert "importing candidate.py changes" in f.summary
    streams = [x for x in findings(res, "tampering", "info") if x.evidence.get("streams") == "skipped"]
    assert streams and streams[0].evidence["reason"] == "no CUDA device"


def test_fallback_skips_torch_backends_with_the_reason(reports):
    r = result(reports("bench-honest"), "fallback")
    assert r.status == "skip" and "backend torch" in r.reason and "non-torch backends only" in r.reason


@pytest.mark.parametrize("task_id", CLEAN)
def test_clean_tasks_get_no_fail(task_id, reports):
    res = reports(task_id)
    bad = [f.summary for f in res.findings if f.severity in ("fail", "warn")]
    assert not bad, bad


# ----------------------------------------------------------------------------- static scans


def test_scan_resolves_aliases_call_graph_and_except_fallbacks(tmp_path):
    src = tmp_path / "c.py"
    src.write_text(textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        from torch import matmul as mm
        import triton
        import triton.language as tl
        from reference import softmax as ref_softmax

        @triton.jit
        def _k(x_ptr, BLOCK: tl.constexpr):
            x = tl.load(x_ptr + tl.arange(0, BLOCK))
            tl.store(x_ptr + tl.arange(0, BLOCK), tl.sum(x, 0) + x)

        def _launch(x):
            _k[(1,)](x, BLOCK=16)
            return x

        def _unused(x):
            return F.softmax(x, -1)

        def entry(x, w):
            if x.shape[0] > 4096:
                return mm(x, w)
            y = x @ w
            try:
                return _launch(y)
            except RuntimeError:
                return ref_softmax(y)
    """))
    res = scan_fallback(TaskSources(src.parent), src.name, "entry", "reference")
    by_line = {(h.kind, h.line): h for h in res.hits}
    assert by_line[("framework-op", 22)].name == "torch.matmul"
    assert by_line[("framework-op", 23)].name == "@"
    assert ("reference", 27) in by_line and by_line[("reference", 27)].in_except
    exc = by_line[("except-fallback", 26)]
    assert exc.detail["try_line"] == 24 and "ref_softmax" in exc.text
    assert ("reference", 6) in by_line  # the import itself
    assert not any(h.line == 18 for h in res.hits)  # _unused is not reachable from entry
    assert not any(h.line in (10, 11) for h in res.hits)  # kernel bodies are not framework code
    assert res.launch_lines == [14]
    assert set(res.functions) == {"entry", "_launch"}


def test_scan_state_writes_finds_assignments_setters_and_setattr(tmp_path):
    src = tmp_path / "c.py"
    src.write_text(textwrap.dedent("""\
        import os, time, threading
        import torch as T
        T.backends.cuda.matmul.allow_tf32 = True
        T.set_float32_matmul_precision("medium")
        setattr(time, "perf_counter", lambda: 0.0)
        os.environ["NVIDIA_TF32_OVERRIDE"] = "1"
        def f():
            threading.Thread(target=print, daemon=True).start()
    """))
    sites = {s.line: s for s in scan_state_writes(TaskSources(src.parent), src.name)}
    assert sites[3].target == "torch.backends.cuda.matmul.allow_tf32"
    assert "torch.get_float32_matmul_precision()" in sites[4].keys
    assert sites[5].target == "time.perf_counter"
    assert sites[6].keys == ("env",)
    assert sites[8].keys == ("threads",)


# ----------------------------------------------------------------------------- synthetic fallback

KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _triton_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    return out
"""


def test_fallback_triton_candidate_that_never_launches(runner, tmp_path):
    cand = KERNEL + "\n\ndef add(x, y):\n    return torch.add(x, y)\n"
    d = make_task(tmp_path, "nolaunch", cand, backend="triton")
    res = check(runner, d, "fallback")
    (f,) = findings(res, "fallback", "fail")
    assert "completed no Triton kernel launch" in f.summary and "aten.add" in f.summary
    assert f.evidence["source"] == {"file": "candidate.py", "line": line_of(cand, "torch.add(x, y)")}


def test_fallback_static_hit_on_a_path_no_legal_case_reaches_is_not_judged(runner, tmp_path):
    """A framework call behind ``x.numel() > 1_000_000`` with N at most 4096: fallback looks for a
    legal case that reaches it, finds none, and says it could not judge (issue 39: never a
    warn in an exit-0 report)."""
    cand = KERNEL + textwrap.dedent("""\


        def add(x, y):
            if x.numel() > 1_000_000:
                return torch.matmul(x[None], y[:, None]).squeeze()   # "large inputs: use cuBLAS"
            return _triton_add(x, y)
    """)
    d = make_task(tmp_path, "pathhit", cand, backend="triton")
    res = check(runner, d, "fallback")
    r = result(res, "fallback")
    assert r.status == "skip" and "no legal case kws derived satisfies its branch" in r.not_judged
    assert not findings(res, "fallback", "warn")
    hit = next(f for f in findings(res, "fallback", "info") if "torch.matmul" in f.summary)
    assert hit.evidence["source"] == {"file": "candidate.py", "line": line_of(cand, "torch.matmul")}
    assert "not seen at run time" in hit.summary


def test_fallback_honest_kernel_passes(runner, tmp_path):
    d = make_task(tmp_path, "honest", KERNEL + "\n\ndef add(x, y):\n    return _triton_add(x, y)\n",
                  backend="triton")
    res = check(runner, d, "fallback")
    assert result(res, "fallback").status == "pass"
    (info,) = findings(res, "fallback", "info")
    assert info.evidence["kernels"] == {"_add_kernel": 1}
    assert "with every launch failing the candidate raises" in info.summary


def test_fallback_broad_except_confirmed_by_fault_injection(runner, tmp_path):
    cand = KERNEL + textwrap.dedent("""\


        def add(x, y):
            try:
                return _triton_add(x, y)
            except Exception:
                from reference import add as ref_add
                return ref_add(x, y)
    """)
    d = make_task(tmp_path, "broad", cand, backend="triton")
    res = check(runner, d, "fallback")
    fails = findings(res, "fallback", "fail")
    (inj,) = [f for f in fails if "with every Triton launch failing" in f.summary]
    assert inj.evidence["source"] == {"file": "candidate.py", "line": line_of(cand, "except Exception")}
    assert inj.evidence["within_tolerance"] is True and inj.evidence["attempted"] == 1
    # the kernel works, so the normal run launched it: no "no launch" finding
    assert not any("completed no Triton kernel" in f.summary for f in fails)


# ----------------------------------------------------------------------------- synthetic tampering


def test_tampering_patched_allclose_at_import(runner, tmp_path):
    cand = "import torch\n\ntorch.allclose = lambda *a, **k: True\n\ndef add(x, y):\n    return x + y\n"
    d = make_task(tmp_path, "allclose", cand)
    (f,) = findings(check(runner, d, "tampering"), "tampering", "fail")
    (c,) = [c for c in f.evidence["changes"] if c["key"] == "torch.allclose"]
    assert c["phase"] == "import" and c["change"] == "replaced"
    assert c["source"] == {"file": "candidate.py", "line": 3, "text": "torch.allclose = lambda *a, **k: True"}


def test_tampering_during_the_call_timer_ftz_thread_env(runner, tmp_path):
    cand = textwrap.dedent("""\
        import os, threading, time
        import torch

        _real = time.perf_counter

        def add(x, y):
            time.perf_counter = lambda: _real() * 0.5
            torch.set_flush_denormal(True)
            os.environ["KWS_TEST_FLAG"] = "1"
            threading.Thread(target=time.sleep, args=(30,), daemon=True, name="bg").start()
            return x + y
    """)
    d = make_task(tmp_path, "calltamper", cand)
    res = check(runner, d, "tampering")
    fails = findings(res, "tampering", "fail")
    assert len(fails) == 1, [(f.severity, f.summary, f.evidence) for f in res.findings]
    fail = fails[0]
    keys = {c["key"]: c for c in fail.evidence["changes"]}
    assert keys["time.perf_counter"]["phase"] == "call" and keys["time.perf_counter"]["source"]["line"] == 7
    assert keys["flush_denormal (CPU FTZ/DAZ)"]["after"] == "True"
    warns = findings(res, "tampering", "warn")
    wkeys = {c["key"] for w in warns for c in w.evidence["changes"]}
    assert {"KWS_TEST_FLAG", "bg"} <= wkeys
    # a thread left running is a hack-class signal (after-return): tagged, and the part of the
    # check that would confirm it is named under not_judged (one rule for suspicion)
    (thread,) = [w for w in warns if {c["key"] for c in w.evidence["changes"]} == {"bg"}]
    assert thread.evidence["suspicion"] == "after-return"
    assert "one call of the candidate changes" in fail.summary


def test_tampering_by_the_reference_is_only_reported(runner, tmp_path):
    ref = "import torch\n\ntorch.set_num_threads(1)\ntorch.use_deterministic_algorithms(True)\n\n" \
          "def add(x, y):\n    return x + y\n"
    d = make_task(tmp_path, "reftamper", "def add(x, y):\n    return x + y\n", reference=ref)
    res = check(runner, d, "tampering")
    assert result(res, "tampering").status == "pass"
    infos = findings(res, "tampering", "info")
    rinfo = next(f for f in infos if "reference changes global state" in f.summary)
    # the harness fills uninitialised memory with NaN (deterministic algorithms on, warn-only), so
    # use_deterministic_algorithms(True) shows as the warn-only flag turning off
    keys = {c["key"] for c in rinfo.evidence["reference_changes"]}
    assert keys & {"torch.are_deterministic_algorithms_enabled()",
                   "torch.is_deterministic_algorithms_warn_only_enabled()"}, keys


def test_scan_hash_order_follows_task_local_imports(tmp_path):
    from workstation.checks.support.static import scan_hash_order

    (tmp_path / "candidate.py").write_text("import helpers\nfrom torch import nn\n\ndef f(x):\n"
                                           "    return helpers.g(x)\n")
    (tmp_path / "helpers.py").write_text("ORDER = {'a', 'b'}\n\ndef g(x):\n    return [hash(k) for k in ORDER]\n")
    hits = scan_hash_order(TaskSources(tmp_path), "candidate.py")
    assert {(h["file"], h["line"]) for h in hits} == {("helpers.py", 1), ("helpers.py", 4)}
    (tmp_path / "plain.py").write_text("d = {'a': 1}\n\ndef f(x):\n    return sorted(d)\n")
    assert scan_hash_order(TaskSources(tmp_path), "plain.py") == []
