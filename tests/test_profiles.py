"""Profiles as evidence: the readers of each format (tests/fixtures/profiles, made by
scripts/capture_profile_fixtures.py), the schema layer's guard for attached files, the
``[[profiles]]`` task key, kws's own profile on the CPU, the GPU-only verdicts on injected
traces, ``kws profile``, and the findings on the profile sample tasks."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLE_QUEUE
from workstation.checks.support.profiling import SelfProfile, family_of, role_run
from workstation.engine.context import CallOutcome, CheckContext
from workstation.engine.report import to_json_dict
from workstation.engine.run import run_checks
from workstation.profiles.analysis import (
    device_peaks,
    is_delegated,
    is_own,
    kernel_base,
    kernel_rooflines,
    op_base,
    role_summary,
)
from workstation.profiles.load import load_all, read_profile
from workstation.profiles.ncu import byte_factor
from workstation.protocol.extras.monitors import TritonLaunchesReport
from workstation.protocol.extras.timing import ProfileExtra, ProfileTrace, Workload
from workstation.protocol.steps import ProfileStep
from workstation.protocol.wire import StepResult
from workstation.review.profile import ProfileView, bar, profile_text
from workstation.schema.attached import open_sqlite, parse_json, read_bytes, read_csv_rows
from workstation.schema.problem import Problem
from workstation.task.format import load_task

FIX = Path(__file__).parent / "fixtures" / "profiles"


def _read(name: str, fmt: str, **kw):
    return read_profile(FIX / name, fmt, source=name, role=kw.pop("role", "candidate"), **kw)


# ----------------------------------------------------------------------------- readers


def test_cpu_trace_captured_here_gives_host_ops_calls_and_wall_time():
    p = _read("cpu_trace.json", "torch-trace")
    assert p.device_kind == "cpu" and p.kernels == () and p.launches is None
    assert p.calls == 2  # two ProfilerStep# spans
    names = {o.name: o for o in p.ops}
    assert "aten::matmul" in names and "aten::relu" in names
    assert names["aten::matmul"].count == 2  # outermost ops only: aten::mm inside matmul is not listed
    assert "aten::mm" not in names
    assert p.wall_ns and p.wall_ns > sum(o.total_ns for o in p.ops if o.name == "aten::relu")


def test_gpu_trace_kernels_launches_busy_time_and_launching_op():
    p = _read("gpu_trace.json", "torch-trace")
    assert p.device == "NVIDIA H100 80GB HBM3" and p.device_kind == "cuda" and p.calls == 2
    k = {s.name: s for s in p.kernels}
    add, gemm = k["_fused_add_kernel"], k["sm90_xmma_gemm_f16f16_f32_tn_n_tilesize128x128x64"]
    assert (add.count, add.total_ns, add.launched_by) == (2, 24_000.0, "")  # a Triton launch from Python
    assert (gemm.count, gemm.total_ns, gemm.launched_by) == (2, 60_000.0, "aten::mm")
    copy = k["Memcpy DtoD (Device -> Device)"]
    assert copy.kind == "memcpy" and copy.bytes == 2 * 1048576
    assert p.launches == 4 and p.busy_ns == 2 * (12 + 30 + 4) * 1e3 and p.wall_ns == 120_000.0
    assert p.device_time_ns() == 92_000.0


def test_role_summary_own_share_respects_delegated_ops():
    p = _read("gpu_trace.json", "torch-trace")
    plain = role_summary(p, own=["_fused_add_kernel"], family_of=family_of)
    assert plain["own_share"] == pytest.approx(24 / 92)  # the copy counts in the device time
    deleg = role_summary(p, own=["_fused_add_kernel"], delegated=["matmul"], family_of=family_of)
    assert deleg["own_share"] == pytest.approx(24 / 32)  # the delegated GEMM is left out
    assert deleg["delegated_ns_per_call"] == 30_000.0 and deleg["own_ns_per_call"] == 12_000.0
    assert deleg["launches_per_call"] == 2.0
    assert [k["own"] for k in deleg["kernels"]][:1] == [False]  # the GEMM, largest first


def test_ncu_details_page():
    p = _read("ncu_details.csv", "ncu-csv")
    assert p.device == "NVIDIA H100 80GB HBM3" and p.launches == 3
    k = {s.name: s for s in p.kernels}
    add = k["_fused_add_kernel"]
    assert add.count == 2 and add.total_ns == pytest.approx((12.58 + 12.45) * 1e3)
    assert add.bytes == pytest.approx(2 * (16.78 + 8.39) * 1e6)
    assert add.flops == pytest.approx(2 * 2_097_152)  # "2,097,152": thousands separators
    assert any(n.startswith("void at::native::vectorized_elementwise_kernel") for n in k)


def test_ncu_raw_page_units_row():
    p = _read("ncu_raw.csv", "ncu-csv")
    (k,) = p.kernels
    assert k.name == "matmul_kernel" and k.count == 2 and p.device == "NVIDIA A100-SXM4-80GB"
    assert k.total_ns == pytest.approx((0.412 + 0.409) * 1e6)  # msecond
    assert k.bytes == pytest.approx(2 * 0.0503e9)  # Gbyte, powers of 1000
    assert k.flops == pytest.approx(2 * 2 * 1_073_741_824)  # 2 x ffma
    assert byte_factor("KiB") == 1024 and byte_factor("Kbyte") == 1000 and byte_factor("usecond") is None


def test_proton_hatchet_tree_and_device_record():
    p = _read("run.hatchet", "proton")
    k = {s.name: s for s in p.kernels}
    assert set(k) == {"matmul_kernel", "_layer_norm_fwd"}  # ROOT and the scope are not kernels
    mm = k["matmul_kernel"]
    assert (mm.count, mm.total_ns, mm.flops, mm.bytes) == (10, 4.1e6, 21_474_836_480, 503_316_480)
    assert p.launches == 20 and p.device_info["arch"] == "90"
    assert p.device_info["peak_bandwidth"] == pytest.approx(2 * 5120 * 2619000 * 1e3 / 8)


def test_nsys_sqlite_tables():
    p = _read("nsys.sqlite", "nsys-sqlite")
    assert p.device == "NVIDIA H200" and p.calls == 3  # three kws#call NVTX ranges
    k = {s.name: s for s in p.kernels}
    assert k["_softmax_kernel"].count == 3 and k["_softmax_kernel"].total_ns == 8000 + 7500 + 7800
    assert k["[memcpy]"].bytes == 4194304
    assert p.launches == 3  # cudaLaunchKernel_v7000, not the memcpy call
    assert p.busy_ns == 8000 + 1000 + 7500 + 7800 and p.wall_ns == 12000 + 10000 + 10000


def test_names_and_ops_normalise():
    assert kernel_base("void my_kernel<float, 4>(float*, int)") == "my_kernel"
    assert is_own("_add_kernel_0d1d2de", ["_add_kernel"]) and not is_own("other", ["_add_kernel"])
    assert op_base("aten::addmm") == op_base("aten.addmm.default") == "addmm"
    assert is_delegated("aten::addmm", ["matmul"], family_of) and not is_delegated("aten::relu", ["matmul"], family_of)


def test_roofline_positions_against_datasheet_peaks():
    peaks = device_peaks("NVIDIA A100-SXM4-80GB")
    assert peaks["bandwidth"] == 2.039e12
    rows = kernel_rooflines(_read("ncu_raw.csv", "ncu-csv"), peaks)
    (r,) = rows
    assert r["bandwidth"] == pytest.approx(2 * 0.0503e9 / ((0.412 + 0.409) * 1e-3))
    assert r["bandwidth_fraction"] == pytest.approx(r["bandwidth"] / 2.039e12)
    assert device_peaks("Some Future GPU") is None
    assert device_peaks("", {"peak_bandwidth": 3.3e12})["bandwidth"] == 3.3e12


# ----------------------------------------------------------------------------- the guard


def test_guard_refuses_large_deep_nonfinite_and_non_utf8_json(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * 100 + b"0]")
    with pytest.raises(Problem, match="larger than the 50-byte limit"):
        read_bytes(big, max_bytes=50)
    with pytest.raises(Problem, match="nested 300 levels deep"):
        parse_json("[" * 300 + "]" * 300, "x.json")
    with pytest.raises(Problem, match="NaN"):
        parse_json('{"dur": NaN}', "x.json")
    with pytest.raises(Problem, match=r"byte 0xff at offset 2"):
        parse_json(b'[1\xff]', "x.json")
    with pytest.raises(Problem, match="line 1, column"):
        parse_json("[1,", "x.json")
    assert parse_json('["[[[[ in a string"]', "x.json", max_depth=2) == ["[[[[ in a string"]


def test_guard_csv_limits_and_log_lines():
    rows = read_csv_rows('==PROF== hello\n"ID","Kernel Name"\n"0","k"\n', "x.csv", header_starts=("ID",))
    assert rows == [["ID", "Kernel Name"], ["0", "k"]]
    with pytest.raises(Problem, match="no CSV header line"):
        read_csv_rows("a,b\n", "x.csv", header_starts=("ID",))
    with pytest.raises(Problem, match="fields"):
        read_csv_rows(",".join(["x"] * 50), "x.csv", max_fields=10)
    with pytest.raises(Problem, match="more than 3 rows"):
        read_csv_rows("a\n" * 10, "x.csv", max_rows=3)


def test_guard_sqlite_is_read_only_checked_and_bounded(tmp_path):
    not_db = tmp_path / "x.sqlite"
    not_db.write_text("hello")
    with pytest.raises(Problem, match="not an SQLite 3 database"):
        with open_sqlite(not_db):
            pass
    db = tmp_path / "y.sqlite"
    shutil.copy(FIX / "nsys.sqlite", db)
    before = db.read_bytes()
    with open_sqlite(db) as conn:
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("CREATE TABLE t (x)")
    assert db.read_bytes() == before and not (tmp_path / "y.sqlite-journal").exists()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(before[: len(before) // 2])
    with pytest.raises(Problem):
        with open_sqlite(cut) as conn:
            conn.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    with open_sqlite(db, max_steps=10) as conn:  # the work bound interrupts a long query
        with pytest.raises(sqlite3.OperationalError, match="interrupt"):
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                         "SELECT count(*) FROM c").fetchall()


def test_a_file_of_the_wrong_format_is_a_problem_naming_file_and_key(tmp_path):
    f = tmp_path / "p.json"
    f.write_text('{"not": "a trace"}')
    with pytest.raises(Problem) as e:
        read_profile(f, "torch-trace", source="p.json", role="candidate", key="profiles[0].file")
    assert e.value.key == "profiles[0].file" and "not a torch-trace profile" in e.value.problem
    with pytest.raises(Problem, match="not a proton hatchet file"):
        read_profile(f, "proton", source="p.json", role="candidate")
    f.write_text("a,b\n1,2\n")
    with pytest.raises(Problem, match="no CSV header line"):
        read_profile(f, "ncu-csv", source="p.csv", role="candidate")


# ----------------------------------------------------------------------------- task.toml


def _task_with_profiles(tmp_path: Path, table: str, files: dict[str, str]) -> Path:
    dest = tmp_path / "rmsnorm-ncu-profile"
    shutil.copytree(SAMPLE_QUEUE / "tasks" / "rmsnorm-ncu-profile", dest, ignore=shutil.ignore_patterns("__pycache__"))
    text = (dest / "task.toml").read_text()
    text = text[: text.index("# kws extension")] + table
    (dest / "task.toml").write_text(text)
    for name, content in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(content)
    return dest


def test_profiles_key_is_validated_at_load_and_read_lazily(tmp_path):
    d = _task_with_profiles(tmp_path, '[[profiles]]\nfile = "a.hatchet"\nrole = "baseline"\ncalls = 4\n',
                            {"a.hatchet": "this is not JSON"})
    t = load_task(d)  # loads: the file is only checked for place, size and format name
    (ap,) = t.profiles
    assert (ap.format, ap.role, ap.calls, ap.key) == ("proton", "baseline", 4, "profiles[0]")
    ((_, got),) = load_all(t)
    assert isinstance(got, Problem) and got.key == "profiles[0].file" and "not valid JSON" in got.problem
    for table, key, msg in [
        ('[[profiles]]\nfile = "../x.csv"\n', "profiles[0].file", "without '..'"),
        ('[[profiles]]\nfile = "none.csv"\n', "profiles[0].file", "does not exist"),
        ('[[profiles]]\nfile = "p.txt"\n', "profiles[0].format", "cannot tell the format"),
        ('[[profiles]]\nfile = "p.txt"\nformat = "perfetto"\n', "profiles[0].format", "perfetto"),
        ('[[profiles]]\nfile = "p.txt"\nformat = "proton"\nrole = "judge"\n', "profiles[0].role", "judge"),
        ('[[profiles]]\nfile = "p.txt"\nformat = "proton"\ncase = { M = 0, N = 4, dtype = "float16" }\n',
         "profiles[0].case.M", "outside [params]"),
    ]:
        d = _task_with_profiles(tmp_path / key.replace("[", "_").replace("]", "").replace(".", "_") / msg[:4],
                                table, {"p.txt": "x"})
        with pytest.raises(Problem) as e:
            load_task(d)
        assert e.value.key == key and msg in e.value.problem, (table, str(e.value))


def test_profile_over_the_size_cap_is_refused_at_load(tmp_path, monkeypatch):
    import workstation.task.format as fmt

    d = _task_with_profiles(tmp_path, '[[profiles]]\nfile = "p.csv"\n', {"p.csv": "x" * 200})
    monkeypatch.setattr(fmt, "MAX_PROFILE_BYTES", 100)
    with pytest.raises(Problem, match="larger than the 100-byte limit"):
        load_task(d)


# ----------------------------------------------------------------------------- kws's own profile


@pytest.mark.slow
def test_self_profile_on_cpu_names_the_triton_kernels_from_launch_tracing(runner):
    t = load_task(SAMPLE_QUEUE / "tasks" / "softmax-gen")
    doc = to_json_dict(run_checks(t, runner, only=["profile"], seeds=[0]))
    (c,) = doc["checks"]
    assert c["status"] == "pass", doc["findings"]
    prof = doc["profile"]["self"]
    assert prof["time_shares"] is False and "interpreter" in prof["why_no_time_shares"]
    cand, ref = prof["roles"]
    assert cand["role"] == "candidate" and ref["role"] == "reference"
    assert cand["triton_launches"]["profiled"] == {"_softmax_kernel": 1}
    assert cand["own_kernels"] == ["_softmax_kernel"] and cand["kernels"][0]["total_ns"] is None
    assert cand["launches_per_call"] == 1.0  # the interpreter's own argument copies are not counted
    assert any(o["name"] == "aten::softmax" for o in ref["ops"])
    assert prof["workload"]["read_bytes"] == 64 * 1000 * 4


@pytest.mark.slow
def test_self_profile_fails_a_candidate_whose_kernel_never_launches(runner):
    t = load_task(SAMPLE_QUEUE / "tasks" / "linear-relu-fallback")
    doc = to_json_dict(run_checks(t, runner, only=["profile"], seeds=[0]))
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert len(fails) == 1 and "own kernels never ran (_linear_relu_kernel)" in fails[0]["summary"]
    assert "aten::linear x1" in fails[0]["summary"] and "constexpr" in fails[0]["summary"]
    assert fails[0]["repro"].endswith("--only profile --case '{\"K\": 128, \"M\": 64, \"N\": 96, \"dtype\": "
                                      "\"float16\"}' --seeds 0")


@dataclass
class _Device:
    kind: str = "cuda"
    label: str = "cuda (NVIDIA H100 80GB HBM3)"
    interpreter: bool = False
    versions: dict = None


class _GpuRunner:
    """A runner stand-in whose device is a GPU; running a job is a test failure."""

    device = _Device()
    max_parallel = 1

    def run(self, *a, **k):
        raise AssertionError("no job runs: the self-profile is injected")


def _outcome(role: str, trace: dict, launches: dict, calls: int) -> CallOutcome:
    spec = ProfileStep(role=role, case={"N": 4, "dtype": "float16"}, calls=calls)
    extra = ProfileExtra(trace=ProfileTrace(events=trace["traceEvents"], device_properties=trace["deviceProperties"]),
                         launches=TritonLaunchesReport(kernels=launches, launches=sum(launches.values())),
                         warmup_launches=TritonLaunchesReport(kernels=launches), calls=calls, interpreter=False,
                         workload=Workload(read_bytes=8_000_000, write_bytes=4_000_000, flops=None))
    return CallOutcome(spec, StepResult(index=0, ok=True, error=None, outputs=[], extra=extra, arrays={}, seconds=0.1))


def _injected(monkeypatch, task_dir: Path, claim: float, baseline_wall_us: float) -> dict:
    """Run the profile check on a GPU-shaped self-profile: the candidate's trace is
    tests/fixtures/profiles/gpu_trace.json; the baseline's one kernel per call and
    ProfilerStep spans of ``baseline_wall_us``."""
    import workstation.checks.profile as mod

    cand_trace = json.loads((FIX / "gpu_trace.json").read_text())
    base_ev = []
    for i in range(2):
        t0 = 10_000.0 + i * 1000
        base_ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": t0,
                     "dur": baseline_wall_us, "pid": 1, "tid": 1},
                    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": t0 + 5, "dur": 50.0,
                     "pid": 0, "tid": 7}]
    base_trace = {"traceEvents": base_ev, "deviceProperties": cand_trace["deviceProperties"]}
    sp = SelfProfile(case={"N": 4, "dtype": "float16"}, seed=0, case_source="test", on_gpu=True,
                     device="cuda (NVIDIA H100 80GB HBM3)",
                     candidate=role_run("candidate", _outcome("candidate", cand_trace, {"_fused_add_kernel": 2}, 2)),
                     other=role_run("baseline", _outcome("baseline", base_trace, {}, 2)),
                     own_names=["_fused_add_kernel"], delegated=[])
    monkeypatch.setattr(mod, "self_profile", lambda ctx: sp)
    task = load_task(task_dir)
    task.claims = type(task.claims)(status="pass", speedup=claim)
    ctx = CheckContext(task, _GpuRunner(), seeds=[0])
    findings = mod.SelfProfileCheck().run(ctx)
    return {"findings": findings, "doc": ctx.extensions["profile"]["self"]}


def test_gpu_time_shares_and_claim_split_on_an_injected_trace(monkeypatch):
    got = _injected(monkeypatch, SAMPLE_QUEUE / "tasks" / "gelu-small-fallback", claim=3.0, baseline_wall_us=100.0)
    by = {f.severity: [] for f in got["findings"]}
    for f in got["findings"]:
        by[f.severity].append(f.summary)
    # own kernel 12 us of 46 us device time per call (GEMM 30 us, copy 4 us): 26% -> warn
    assert any("own kernels ran for 26% of its device time" in s and "aten::mm" in s for s in by["warn"]), by
    # claim 3x over a 100 us baseline = 33.3 us; the candidate keeps the GPU busy 46 us per call
    (split,) = [s for s in by["fail"] if "implies at most" in s]
    assert "33.3 us" in split and "46 us" in split and "framework kernels 30 us" in split
    assert got["doc"]["time_shares"] is True
    assert got["doc"]["roofline"]["bandwidth"] == pytest.approx(12e6 / 46e-6)
    # a claim the split allows: 1.5x over 100 us = 66.7 us, above 46 us x 1.1
    ok = _injected(monkeypatch, SAMPLE_QUEUE / "tasks" / "gelu-small-fallback", claim=1.5, baseline_wall_us=100.0)
    assert not any("implies at most" in f.summary for f in ok["findings"])


def test_gpu_own_kernels_below_a_tenth_of_the_device_time_fail(monkeypatch):
    import workstation.checks.profile as mod

    monkeypatch.setattr(mod, "OWN_SHARE_FAIL", 0.30)  # the fixture's own share is 26%
    got = _injected(monkeypatch, SAMPLE_QUEUE / "tasks" / "gelu-small-fallback", claim=0.0, baseline_wall_us=100.0)
    assert any(f.severity == "fail" and "own kernels ran for 26%" in f.summary for f in got["findings"])


@pytest.mark.skipif(not shutil.which("nvidia-smi"), reason="needs a GPU: the device-time profile runs on CUDA only")
def test_self_profile_on_a_gpu_has_device_time_shares(runner):
    t = load_task(SAMPLE_QUEUE / "tasks" / "softmax-gen")
    doc = to_json_dict(run_checks(t, runner, only=["profile"], seeds=[0]))
    prof = doc["profile"]["self"]
    assert prof["time_shares"] is True
    cand = prof["roles"][0]
    assert cand["own_kernels"] == ["_softmax_kernel"] and cand["own_share"] > 0.5
    assert cand["kernels"][0]["total_ns"] > 0 and cand["busy_ns_per_call"] > 0


# ----------------------------------------------------------------------------- attached: findings


@pytest.mark.slow
def test_attached_ncu_numbers_above_the_device_peak_fail(tmp_path, runner):
    csv = (SAMPLE_QUEUE / "tasks" / "rmsnorm-ncu-profile" / "profiles" / "candidate.ncu.csv").read_text()
    csv = csv.replace('"rms_norm_fwd_kernel"', '"_rmsnorm_rows"')
    for t in ('"47.42"', '"47.26"', '"47.39"'):  # 134 MB per launch in 20 us: 6.7 TB/s on an H100 SXM
        csv = csv.replace(t, '"20.00"')
    d = _task_with_profiles(tmp_path, '[[profiles]]\nfile = "p.csv"\nrole = "candidate"\ncalls = 3\n', {"p.csv": csv})
    doc = to_json_dict(run_checks(load_task(d), runner, only=["profile-attached"], seeds=[0]))
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert len(fails) == 1 and "above the peak 3.35 TB/s" in fails[0]["summary"]
    assert "H100 SXM datasheet" in fails[0]["summary"]
    assert not [f for f in doc["findings"] if "none of which is a kernel" in f["summary"]]  # names match now
    assert doc["profile"]["attached"][0]["kernels"][0]["name"] == "_rmsnorm_rows"


@pytest.mark.slow
@pytest.mark.parametrize("task_id,want", [
    ("gelu-small-fallback", {("profile", "fail"): "own kernels never ran (_gelu_kernel)"}),
    ("rmsnorm-ncu-profile", {("profile-attached", "warn"): "none of which is a kernel of the candidate",
                             ("profile-attached", "info"): "85% of 3350 GB/s"}),
    ("layernorm-trace-claim", {("profile-attached", "fail"): "but the task claims 2.5x",
                               ("profile", "warn"): "9x the baseline's 1"}),
])
def test_profile_sample_tasks(task_id, want, runner):
    doc = to_json_dict(run_checks(load_task(SAMPLE_QUEUE / "tasks" / task_id), runner,
                                  only=["profile", "profile-attached"], seeds=[0]))
    assert not [c for c in doc["checks"] if c["status"] == "error"], doc["checks"]
    for (check, sev), text in want.items():
        hits = [f for f in doc["findings"] if f["check"] == check and f["severity"] == sev and text in f["summary"]]
        assert hits, (check, sev, text, [(f["check"], f["severity"], f["summary"]) for f in doc["findings"]])
    view = ProfileView.from_findings(doc["findings"])
    assert view.roles and view.roles[0].role == "candidate"
    text = profile_text(view, width=120)
    assert "candidate (kws)" in text and "findings:" in text


@pytest.mark.slow
def test_kws_profile_command_prints_the_panel_text_and_exits_like_check():
    from workstation.cli.main import main

    r = CliRunner().invoke(main, ["profile", str(SAMPLE_QUEUE / "tasks" / "gelu-small-fallback")])
    assert r.exit_code == 1, r.output  # a fail finding
    assert "candidate (kws)" in r.output and "aten::gelu" in r.output and "[FAIL] profile" in r.output
    r = CliRunner().invoke(main, ["profile", str(SAMPLE_QUEUE / "tasks" / "rmsnorm-ncu-profile"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["profile"]["attached"][0]["file"] == "profiles/candidate.ncu.csv"
    assert doc["profile"]["self"]["roles"][0]["own_kernels"] == ["_rmsnorm_rows"]


def test_bar_and_empty_view():
    assert bar(0.5, 8) == "████    " and bar(1.0, 4) == "████" and bar(0.0, 3) == "   "
    assert bar(0.0625, 4) == "▎   "
    v = ProfileView.from_findings([{"check": "correctness", "severity": "fail", "summary": "x"}])
    assert v.empty and profile_text(v) == "no profile evidence in this run"
