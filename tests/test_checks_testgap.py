"""``test-gap``: the static scan of authors' tests and the check on tasks."""

from __future__ import annotations

import textwrap

import numpy as np

from tests.conftest import SAMPLE_QUEUE, write_task
from tests.test_checks_shapes import check, fails
from workstation.analysis.compare import compare, resolve_tolerance
from workstation.checks.test_gap import AuthorTestScan, slice_coverage
from workstation.task.model import Tolerance


def scan(tmp_path, body: str, extra_files: dict[str, str] | None = None):
    (tmp_path / "test.py").write_text(textwrap.dedent(body))
    for name, text in (extra_files or {}).items():
        (tmp_path / name).write_text(text)
    return AuthorTestScan(tmp_path, "test.py", "check")


def test_scan_resolves_a_slice_through_names_and_sibling_constants(tmp_path):
    src = scan(tmp_path, """
        import torch
        def check(case, device, seed):
            candidate = _load("candidate.py")
            got, want = run(candidate)
            cols = slice(0, candidate.BLOCK_N)
            torch.testing.assert_close(got[:, cols], want[:, cols], atol=1e-5, rtol=1e-5)
        """, {"candidate.py": "BLOCK_N = 256\n"})
    obs = src.observations((1e-5, 1e-5))
    sl = [o for o in obs if o.kind == "slice"]
    assert sl and sl[0].line == 7
    idx, desc = src.region(sl[0].subscript, {"M": 4, "N": 768}, (4, 768))
    assert desc == "cols 0..255 of 768" and idx[1] == slice(0, 256, 1)


def test_scan_finds_reductions_masks_loose_tolerance_and_excepts(tmp_path):
    src = scan(tmp_path, """
        import torch
        def check(case, device, seed):
            got, want = run()
            n = case["N"] // 2
            try:
                assert torch.allclose(got.sum(), want.sum())
                torch.testing.assert_close(got[0], want[0], atol=1e-2)
                m = torch.isfinite(want)
                torch.testing.assert_close(got[m], want[m], equal_nan=True)
                torch.testing.assert_close(got[..., :n], want[..., :n])
            except AssertionError:
                pass
        """)
    kinds = {o.kind for o in src.observations((1e-5, 1e-5))}
    assert {"reduction", "index", "tolerance", "mask", "equal_nan", "except", "slice"} <= kinds
    obs = src.observations((1e-5, 1e-5))
    tol = next(o for o in obs if o.kind == "tolerance")
    assert tol.value == 1e-2 and "1e+03x" in tol.detail
    ell = next(o for o in obs if o.kind == "slice" and "..." in o.code)
    assert src.region(ell.subscript, {"N": 10}, (3, 10))[1] == "cols 0..4 of 10"


def test_scan_of_a_full_comparison_is_quiet(tmp_path):
    src = scan(tmp_path, """
        import torch
        def check(case, device, seed):
            got, want = run()
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        """)
    assert src.observations((1e-5, 1e-5)) == []


def test_slice_coverage_counts_mismatches_inside():
    e = np.zeros((4, 10))
    g = e.copy()
    g[:, 8:] = 1.0
    tol = resolve_tolerance(Tolerance(1e-5, 1e-5), "float32")
    comp = compare(e, g, tol, expected_dtype="float32", got_dtype="float32")
    cov = slice_coverage([slice(None), slice(0, 8)], e, g, comp)
    assert cov == {"mismatched_inside": 0, "elements_inside": 32, "mismatched_total": 8, "slice_passes": True}


def test_layernorm_testgap_fails_with_the_sliced_columns(runner):
    res = check(runner, SAMPLE_QUEUE / "tasks" / "layernorm-testgap", "test-gap")
    fs = fails(res)
    assert len(fs) == 3  # every declared case
    f = fs[0]
    assert "cols 0..255" in f["summary"] and "cols 256.." in f["summary"]
    obs = [o for o in f["evidence"]["test_observations"] if o["kind"] == "slice"]
    assert obs[0]["mismatched_inside"] == 0 and obs[0]["slice_passes"] is True
    assert f["evidence"]["source"] == {"file": "test.py", "line": obs[0]["line"]}


def test_clean_task_and_no_test_entry(runner, tmp_path):
    res = check(runner, SAMPLE_QUEUE / "tasks" / "softmax-gen", "test-gap")
    assert not fails(res) and res["status"] == "pass"
    res2 = check(runner, write_task(tmp_path), "test-gap")
    assert res2["status"] == "skip" and "no test entry" in res2["reason"]


def test_synthetic_gap_explained_by_a_reduction(runner, tmp_path):
    d = write_task(tmp_path, candidate="def add(x, y):\n    return (x + y).flip(0)\n")
    (d / "test.py").write_text(textwrap.dedent("""
        import torch
        from inputs import make_inputs
        from candidate import add
        from reference import add as ref

        def check(case, device, seed):
            x, y = make_inputs(case, device, seed)
            assert torch.allclose(add(x, y).sum(), ref(x, y).sum(), atol=1e-4)
        """))
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace('inputs = "inputs.py:make_inputs"',
                                             'inputs = "inputs.py:make_inputs"\ntest = "test.py:check"'))
    res = check(runner, d, "test-gap")
    [f, *_] = fails(res)
    assert "sum" in f["summary"] and f["evidence"]["source"]["file"] == "test.py"


def test_scan_ignores_subscripts_of_the_callables_inputs(tmp_path):
    src = scan(tmp_path, """
        import torch
        def check(case, device, seed):
            inputs = make_inputs(case, device, seed)
            got = candidate(inputs[0], inputs[1])
            torch.testing.assert_close(got, reference(inputs[0], inputs[1]), atol=1e-5, rtol=1e-5)
        """)
    assert src.observations((1e-5, 1e-5)) == []
