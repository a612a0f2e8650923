"""The kind-specific checks on small torch tasks (fast: no interpreter): fix-vs-baseline,
source-parity, no-regression, fusion-accuracy, case-coverage; their scheduling by kind."""

from __future__ import annotations

from tests.hostile import findings, make_task, result
from workstation.engine.run import run_checks, select_checks
from workstation.task.format import load_task

BUGGY_ADD = """\
def add(x, y):
    if x.shape[0] == 100:
        raise ValueError("odd length not supported")
    return x + y
"""
CASES = [{"N": 64, "dtype": "float32"}, {"N": 100, "dtype": "float32"}]


def _task(tmp_path, task_id, candidate, *, kind, baseline=None, claims="", cases=CASES, atol=1e-6, rtol=1e-6,
          contract=""):
    files = {"baseline.py": baseline} if baseline is not None else {}
    extra = 'baseline = "baseline.py:add"' if baseline is not None else ""
    d = make_task(tmp_path, task_id, candidate, entry_extra=extra, cases=cases, files=files, atol=atol, rtol=rtol)
    toml = (d / "task.toml").read_text().replace('kind = "generation"', f'kind = "{kind}"')
    if claims:
        toml = toml.replace('[claims]\nstatus = "pass"\n', f"[claims]\n{claims}\n")
    if contract:
        toml = toml.replace("[contract]\n", f"[contract]\n{contract}\n")
    (d / "task.toml").write_text(toml)
    return load_task(d)


def test_kind_checks_are_scheduled_only_for_their_kind(tmp_path):
    gen = _task(tmp_path, "gen", "def add(x, y):\n    return x + y\n", kind="generation")
    ids = select_checks(None, gen)
    assert "case-coverage" in ids
    assert not {"fix-vs-baseline", "source-parity", "no-regression", "fusion-accuracy"} & set(ids)
    assert not {"pallas-kernel", "cuda-build", "nki-kernel"} & set(ids)  # backend torch
    report = _task(tmp_path, "rep", BUGGY_ADD, kind="debugging",
                   claims='status = "fail"\nfailure_class = "runtime-error"')
    assert "fix-vs-baseline" not in select_checks(None, report)  # a failure report: failure-mismatch's shape
    assert "failure-mismatch" in select_checks(None, report)


def test_fix_vs_baseline(tmp_path, runner):
    claims = 'status = "pass"\nfailure = "add raises for N = 100"\nfailure_class = "runtime-error"'
    good = _task(tmp_path, "fix-good", "def add(x, y):\n    return x + y\n", kind="debugging", baseline=BUGGY_ADD,
                 claims=claims)
    res = run_checks(good, runner, only=["fix-vs-baseline"])
    assert result(res, "fix-vs-baseline").status == "pass"
    (info,) = findings(res, "fix-vs-baseline", "info")
    assert "the fix holds" in info.summary and "runtime-error" in info.summary

    half = _task(tmp_path, "fix-half", "def add(x, y):\n    out = x + y\n    out[-1] = 0\n    return out\n",
                 kind="debugging", baseline=BUGGY_ADD, claims=claims)
    fails = findings(run_checks(half, runner, only=["fix-vs-baseline"]), "fix-vs-baseline", "fail")
    texts = " | ".join(f.summary for f in fails)
    assert "still fails where the baseline shows the bug" in texts  # N = 100: raised before, wrong now
    assert "breaks what worked" in texts  # N = 64 passed on the baseline

    nobug = _task(tmp_path, "fix-nobug", "def add(x, y):\n    return x + y\n", kind="debugging",
                  baseline="def add(x, y):\n    return x + y\n", claims=claims)
    r = result(run_checks(nobug, runner, only=["fix-vs-baseline"]), "fix-vs-baseline")
    # a bug that does not show here (e.g. one that needs a GPU) is not evidence against the fix
    assert r.status == "skip" and "does not reproduce on the baseline here" in r.not_judged
    assert "cannot be verified on this device" in r.not_judged and not r.findings

    nobase = _task(tmp_path, "fix-nobase", "def add(x, y):\n    return x + y\n", kind="debugging", claims=claims)
    r = result(run_checks(nobase, runner, only=["fix-vs-baseline"]), "fix-vs-baseline")
    assert r.status == "skip" and "entry.baseline" in r.reason


def test_source_parity(tmp_path, runner):
    src = "def add(x, y):\n    return x + y\n"
    wrong_tail = "def add(x, y):\n    out = x + y\n    if out.shape[0] > 64:\n        out[64:] = 0\n    return out\n"
    t = _task(tmp_path, "port-wrong", wrong_tail, kind="translation", baseline=src)
    res = run_checks(t, runner, only=["source-parity"])
    (f,) = findings(res, "source-parity", "fail")
    assert "the source gets case N=100 float32" in f.summary and f.evidence["source"]["class"] == "pass"
    nan = "import torch\n\ndef add(x, y):\n    return torch.nan_to_num(x + y)\n"
    t2 = _task(tmp_path, "port-nan", nan, kind="migration", baseline=src)
    res2 = run_checks(t2, runner, only=["source-parity"])
    assert result(res2, "source-parity").status == "pass"
    outside = [f for f in findings(res2, "source-parity", "info") if "outside the reference's verdict" in f.summary]
    assert outside and "nan" in outside[0].summary.lower()
    summary = findings(res2, "source-parity", "info")[-1]
    assert summary.evidence["compared"] >= 5 and summary.evidence["bitwise_equal"] >= 4


def test_no_regression(tmp_path, runner):
    base = "def add(x, y):\n    return x + y\n"
    lossy = "import torch\n\ndef add(x, y):\n    return (x.half() + y.half()).float()\n"
    t = _task(tmp_path, "opt-lossy", lossy, kind="optimization", baseline=base,
              claims='status = "pass"\nspeedup = 2.0')
    res = run_checks(t, runner, only=["no-regression"])
    (f,) = findings(res, "no-regression", "fail")
    assert "the optimization regresses" in f.summary and f.evidence["baseline"]["class"] == "pass"
    assert any("judged by speedup-claim" in x.summary for x in findings(res, "no-regression", "info"))
    same = _task(tmp_path, "opt-same", base, kind="optimization", baseline=base,
                 claims='status = "pass"\nspeedup = 2.0')
    assert result(run_checks(same, runner, only=["no-regression"]), "no-regression").status == "pass"


def test_fusion_accuracy(tmp_path, runner):
    cases = [{"N": 4096, "dtype": "float16"}]
    ref = "import torch\n\ndef add(x, y):\n    acc = torch.promote_types(x.dtype, torch.float32)\n" \
          "    return (x.to(acc) + y.to(acc)).to(x.dtype)\n"
    base = "def add(x, y):\n    return x + y\n"
    bf16 = "import torch\n\ndef add(x, y):\n    return (x.float() + y.float()).to(torch.bfloat16).to(x.dtype)\n"
    t = _task(tmp_path, "fuse-bf16", bf16, kind="fusion", baseline=base, cases=cases, atol=1e-1, rtol=1e-1,
              contract='dtypes = ["float16"]')
    (t.dir / "reference.py").write_text(ref)
    res = run_checks(t, runner, only=["fusion-accuracy"])
    (f,) = findings(res, "fusion-accuracy", "fail")
    assert f.summary.startswith("float16: the fused kernel is less accurate than the unfused baseline")
    good = _task(tmp_path, "fuse-good", ref.replace("def add", "def add"), kind="fusion", baseline=base,
                 cases=cases, atol=1e-1, rtol=1e-1, contract='dtypes = ["float16"]')
    (good.dir / "reference.py").write_text(ref)
    r = run_checks(good, runner, only=["fusion-accuracy"])
    assert result(r, "fusion-accuracy").status == "pass"
    assert "stays within the unfused baseline's" in findings(r, "fusion-accuracy", "info")[0].summary


def test_case_coverage(tmp_path, runner):
    capped = "def add(x, y):\n    if x.shape[0] > 2048:\n        raise ValueError('N > 2048')\n    return x + y\n"
    t = _task(tmp_path, "gen-capped", capped, kind="generation")
    res = run_checks(t, runner, only=["case-coverage"])
    (f,) = findings(res, "case-coverage", "fail")
    assert f.summary.startswith("at the max of N (N=4096)") and "N > 2048" in f.summary
    ok = _task(tmp_path, "gen-ok", "def add(x, y):\n    return x + y\n", kind="generation")
    r = run_checks(ok, runner, only=["case-coverage"])
    assert result(r, "case-coverage").status == "pass"
    targets = findings(r, "case-coverage", "info")[-1].evidence["targets"]
    assert {(x["target"].split(" (")[0], x["value"]) for x in targets} == {("min", 1), ("max", 4096),
                                                                             ("ragged tail", 65)}
    assert all(x["covered_by"] for x in targets)


def test_ragged_tail_targets_reach_past_the_block():
    from workstation.checks.case_coverage import _targets, ragged_tail
    from workstation.task.model import ParamSpec

    assert ragged_tail(ParamSpec(), 3) == (17, 16)  # not 3: below a 16-row block there is no tail
    assert ragged_tail(ParamSpec(1, 8192), 1024) == (1025, 1024)
    assert ragged_tail(ParamSpec(8, 8192, 8), 1000) == (520, 512)  # 65 x 8: ragged for blocks 16..512
    assert ragged_tail(ParamSpec(1, 12), 4) is None
    assert ("ragged (odd)", 3) in _targets("N", ParamSpec(1, 12), 4)  # no tail is legal: an odd size
    for v, p in (ragged_tail(ParamSpec(), n) for n in (1, 16, 100, 4096)):
        assert v > p >= 16 and v % p and p & (p - 1) == 0


def test_no_regression_replays_every_failing_call_of_the_battery(tmp_path, runner):
    base = "def add(x, y):\n    return x + y\n"
    odd = "def add(x, y):\n    out = x + y\n    if out.shape[0] % 2 and out.shape[0] > 100:\n" \
          "        out[-1] = 0\n    return out\n"
    t = _task(tmp_path, "opt-oddtail", odd, kind="optimization", baseline=base, claims='status = "pass"\nspeedup = 2.0')
    res = run_checks(t, runner, only=["edge-shapes", "no-regression"])
    assert result(res, "edge-shapes").status == "fail"  # the declared N = 64, 100 pass; odd N > 100 fail
    (f,) = findings(res, "no-regression", "fail")
    regressed = [r["case"]["N"] for r in f.evidence["regressions"]]
    assert regressed and all(n % 2 and n > 100 for n in regressed)
    assert f.evidence["candidate_failing"] >= len(regressed)


def test_fusion_accuracy_does_not_pass_a_dtype_that_never_ran(tmp_path, runner):
    ref = "import torch\n\ndef add(x, y):\n    acc = torch.promote_types(x.dtype, torch.float32)\n" \
          "    return (x.to(acc) + y.to(acc)).to(x.dtype)\n"
    base = "import torch\n\ndef add(x, y):\n    if x.dtype == torch.float32:\n" \
           "        raise NotImplementedError('fp16 only')\n    return x + y\n"
    t = _task(tmp_path, "fuse-partial", ref, kind="fusion", baseline=base, cases=[{"N": 4096, "dtype": "float16"}],
              atol=1e-1, rtol=1e-1, contract='dtypes = ["float16", "float32"]')
    (t.dir / "reference.py").write_text(ref)
    r = result(run_checks(t, runner, only=["fusion-accuracy"]), "fusion-accuracy")
    assert r.status == "skip" and "float32: no run" in r.not_judged and "float16" not in r.not_judged, r
    assert any(f.summary.startswith("float16: the fused kernel's error stays within") for f in r.findings)


def test_edge_shapes_infers_a_pattern_only_from_calls_that_ran():
    from workstation.checks.edge_shapes import _patterns, observed
    from workstation.checks.support.trials import Trial, TrialResult
    from workstation.engine.context import CallOutcome
    from workstation.protocol.steps import CallStep

    def tr(k, status, death=""):
        case = {"K": k, "dtype": "float32"}
        ref = CallOutcome(CallStep(role="reference", case=case), None, death="", death_status="")
        cand = CallOutcome(CallStep(role="candidate", case=case), None, death="hung" if death else "",
                           death_status=death)
        return TrialResult(Trial(case, 0), ref, cand, status, "timeout" if status == "error" else "")

    ran = [tr(1024, "pass"), tr(2048, "pass")]
    never = [tr(1000, "error", "skipped"), tr(3000, "error", "timeout")]
    assert all(observed(r) for r in ran) and not any(observed(r) for r in never)
    pat = _patterns(ran + never, ["K"], [{"K": 512, "dtype": "float32"}], "timeout")
    # "K fails exactly when K % 1024 != 0" would be read from the two calls that never ran
    assert pat["rules"] == {} and "fails exactly" not in pat["text"]
