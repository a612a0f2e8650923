"""Reading Triton IR for precision facts (workstation.harness.ir) and the static scan of a
reference for imports of the candidate (workstation.checks.support.numaudit).

The AOT test compiles real kernels for sm_90 in ``python -m workstation.harness.aot_compile``
(no GPU needed, no TRITON_INTERPRET), exactly as the ``triton_aot`` step does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workstation.checks.support.static import scan_reference_imports
from workstation.harness.ir import _Locs, _low_precision_accumulators, analyze

REPO = Path(__file__).resolve().parents[1]

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, PREC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * K + (k0 + offs_k)[None, :])
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * BN + offs_n[None, :])
        acc = tl.dot(a, b, acc, input_precision=PREC)
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@triton.jit
def mm16(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * K + (k0 + offs_k)[None, :])
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * BN + offs_n[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


@triton.jit
def sumsq(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
    for s in range(0, n, BLOCK):
        x = tl.load(x_ptr + s + cols, mask=s + cols < n, other=0.0)
        acc += x * x
    tl.store(y_ptr, tl.sum(acc, axis=0))
'''


def _launch(qualname: str, signature: dict, constexprs: dict, path: Path) -> dict:
    return {"file": str(path), "qualname": qualname, "name": qualname, "line": 1, "signature": signature,
            "constexprs": constexprs, "options": {"num_warps": 4, "num_stages": 3}}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot")
    (d / "kern.py").write_text(KERNELS)
    mm_sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "K": "i32", "PREC": "constexpr",
              "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    launches = [
        _launch("mm", mm_sig, {"PREC": "tf32", "BM": 64, "BN": 64, "BK": 32}, d / "kern.py"),
        _launch("mm", mm_sig, {"PREC": "ieee", "BM": 64, "BN": 64, "BK": 32}, d / "kern.py"),
        _launch("sumsq", {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 256},
                d / "kern.py"),
        _launch("mm16", dict({k: v for k, v in mm_sig.items() if k != "PREC"}, a_ptr="*fp16", b_ptr="*fp16",
                             c_ptr="*fp16"), {"BM": 64, "BN": 64, "BK": 32}, d / "kern.py"),
        _launch("mm", dict(mm_sig, a_ptr="*fp8e4nv", b_ptr="*fp8e4nv"), {"PREC": "tf32", "BM": 64, "BN": 64, "BK": 32},
                d / "kern.py"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(d / "triton-cache")
    env["PYTHONPATH"] = str(REPO)
    req = {"task_dir": str(d), "launches": launches, "targets": [["cuda", 90, 32]]}
    p = subprocess.run([sys.executable, "-m", "workstation.harness.aot_compile"], input=json.dumps(req), text=True,
                       capture_output=True, env=env, cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)["kernels"]


def test_default_fp32_dot_lowers_to_tf32_wgmma(compiled):
    k = compiled[0]
    assert "error" not in k, k.get("error")
    an = k["analysis"]
    (dot,) = an["dots"]
    assert (dot["a"], dot["b"], dot["d"], dot["input_precision"]) == ("f32", "f32", "f32", "tf32")
    assert dot["lowering"] == "wgmma"
    assert dot["source"] == {"file": "kern.py", "line": 15}  # the tl.dot line of mm
    assert any(m["a"] == "tf32" and m["b"] == "tf32" and m["d"] == "f32" and m["instr"].startswith("wgmma")
               for m in an["mma"])
    assert k["target"] == "cuda sm_90" and k["qualname"] == "mm"


def test_ieee_dot_has_no_mma(compiled):
    an = compiled[1]["analysis"]
    (dot,) = an["dots"]
    assert dot["input_precision"] == "ieee" and dot["lowering"] == "fma"
    assert an["mma"] == [] and an["fma"].get("f32", 0) > 0 and an["fma_dots"] == 1


def test_fp16_loop_accumulator_and_reduction(compiled):
    an = compiled[2]["analysis"]
    accs = an["low_precision_accumulators"]
    reds = an["low_precision_reductions"]
    assert accs and accs[0]["dtype"] == "f16" and accs[0]["source"] == {"file": "kern.py", "line": 38}
    assert reds and reds[0]["dtype"] == "f16" and reds[0]["source"]["line"] == 39


def test_half_precision_mma_accumulator(compiled):
    an = compiled[3]["analysis"]
    (dot,) = an["dots"]
    assert (dot["a"], dot["d"]) == ("f16", "f16")
    assert any(m["d"] == "f16" and m["a"] == "f16" for m in an["mma"])


def test_fp8_dot_without_promotion(compiled):
    an = compiled[4]["analysis"]
    (dot,) = an["dots"]
    assert dot["a"] == "f8E4M3FN" and dot["max_num_imprecise_acc"] == 2**30  # sm_90 default: never promote
    assert any(m["a"] == "e4m3" and m["d"] == "f32" for m in an["mma"])


def test_loc_resolution_prefers_task_files():
    ir = textwrap.dedent('''\
        #loc1 = loc("/tmp/t/cand.py":12:5)
        #loc2 = loc("/site-packages/triton/language/standard.py":287:12)
        #loc3 = loc(callsite(#loc2 at #loc1))
        #loc4 = loc("acc"(#loc3))
        ''')
    locs = _Locs(ir, "/tmp/t")
    assert locs.resolve("#loc4") == {"file": "cand.py", "line": 12}
    assert locs.of_line('%x = arith.addf %a, %b : f16 loc(#loc3)') == {"file": "cand.py", "line": 12}


def test_low_precision_accumulator_text():
    gir = textwrap.dedent('''\
        %acc = scf.for %s = %c0 to %n step %c1 iter_args(%a = %z) -> (tensor<128xbf16, #blocked>)  : i32 {
          %p = arith.mulf %x, %x : tensor<128xbf16, #blocked> loc(#loc9)
          %q = arith.addf %a, %p : tensor<128xbf16, #blocked> loc(#loc9)
          scf.yield %q : tensor<128xbf16, #blocked>
        } loc(#loc9)
        #loc9 = loc("/tmp/t/cand.py":7:9)
        ''')
    (item,) = _low_precision_accumulators(gir, _Locs(gir, "/tmp/t"))
    assert item["dtype"] == "bf16" and item["source"] == {"file": "cand.py", "line": 7}
    # an fp32 loop is not flagged
    assert _low_precision_accumulators(gir.replace("bf16", "f32"), _Locs(gir, "/tmp/t")) == []


def test_analyze_parses_mma_types():
    ptx = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {...};\nwgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 x;"
    an = analyze({"ttir": "", "ttgir": "", "ptx": ptx}, "/tmp/t")
    by = {m["instr"]: m for m in an["mma"]}
    m1 = by["mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"]
    assert (m1["d"], m1["a"], m1["b"]) == ("f16", "f16", "f16")
    m2 = by["wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"]
    assert (m2["d"], m2["a"], m2["b"]) == ("f32", "e4m3", "e4m3")


def test_static_scan_finds_candidate_imports(tmp_path):
    (tmp_path / "candidate.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "helpers.py").write_text("from candidate import f as g\n")
    (tmp_path / "reference.py").write_text(textwrap.dedent('''\
        """Docstring that mentions candidate.py in passing is not a load."""
        import importlib.util
        import helpers
        spec = importlib.util.spec_from_file_location("k", "candidate.py")
        '''))
    hits = scan_reference_imports(tmp_path, "reference.py", "candidate.py")
    whats = {(h["file"], h["line"], h["what"]) for h in hits}
    assert ("helpers.py", 1, "imports candidate") in whats
    assert ("reference.py", 4, "names the candidate's file 'candidate.py'") in whats
    assert [h for h in hits if h["file"] == "helpers.py"][0]["via"] == ["reference.py", "helpers.py"]


def test_static_scan_clean_reference(tmp_path):
    (tmp_path / "candidate.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "reference.py").write_text("import torch\n\ndef f(x):\n    return torch.relu(x)\n")
    assert scan_reference_imports(tmp_path, "reference.py", "candidate.py") == []
