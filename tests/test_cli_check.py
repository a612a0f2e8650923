"""`kws check`: the contract's JSON, exit codes 0/1/2/4 (fail-closed), load errors with file/key/problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO, TASK_TOML, write_task

KWS = [sys.executable, "-m", "workstation.cli.main"]


def kws(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KWS, *args], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_json_shape_and_exit_0(tmp_path):
    d = write_task(tmp_path)
    p = kws("check", str(d), "--json", "--only", "correctness,failure-mismatch")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert set(doc) >= {"task", "task_tree", "device", "complete", "versions", "seeds", "findings", "checks"}
    assert doc["task"] == "add" and doc["seeds"] == [0, 1, 2]
    assert doc["versions"]["kws"] and doc["versions"]["torch"]
    statuses = {c["check"]: c["status"] for c in doc["checks"]}
    assert statuses == {"correctness": "pass", "failure-mismatch": "skip"}
    assert doc["complete"] is True  # failure-mismatch has nothing to look at: every check that applies was judged
    assert all(set(f) == {"check", "severity", "summary", "evidence", "repro"} for f in doc["findings"])


def test_exit_1_on_fail_and_nonfinite_as_strings(tmp_path):
    d = write_task(tmp_path, candidate="import torch\ndef add(x, y):\n    return (x + y) * float('nan')\n")
    p = kws("check", str(d), "--json", "--only", "correctness")
    assert p.returncode == 1
    def reject(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(p.stdout, parse_constant=reject)  # strict JSON: no NaN/Infinity literals
    f = doc["findings"][0]
    assert f["severity"] == "fail" and f["evidence"]["per_seed"][0]["worst"]["got"] == "nan"


def test_exit_2_on_malformed_task_names_file_key_problem(tmp_path):
    d = write_task(tmp_path, toml=TASK_TOML.format(id="add", status="pass", failure_class="").replace(
        'backend = "torch"', 'backend = "fortran"'))
    p = kws("check", str(d), "--json")
    assert p.returncode == 2
    err = json.loads(p.stdout)["error"]
    assert err["file"].endswith("task.toml") and err["key"] == "backend" and "fortran" in err["problem"]
    assert "task.toml: backend: unknown backend" in p.stderr


def test_text_report_is_readable(tmp_path):
    d = write_task(tmp_path, candidate="def add(x, y):\n    return x - y\n")
    p = kws("check", str(d), "--only", "correctness")
    assert p.returncode == 1
    assert "FAIL" in p.stdout and "repro: kws check" in p.stdout and "device: cpu" in p.stdout


def test_bad_options_are_errors_that_name_the_option(tmp_path):
    """Unknown or missing case parameters, values [params] forbids, bad JSON, bad seeds and
    an unavailable device stop with exit 2 and a message naming the option (nothing runs)."""
    d = write_task(tmp_path)
    bad = [
        (["--case", '{"N": 64, "dtype": "float32", "Q": 1}'], "--case", "unknown case parameter(s) 'Q'"),
        (["--case", '{"dtype": "float32"}'], "--case", "missing N"),
        (["--case", '{"N": 64, "dtype": "float32"'], "--case", "not valid JSON"),
        (["--case", "[1, 2]"], "--case", "must be a JSON table"),
        (["--seeds", "a,b"], "--seeds", "'a' is not an integer"),
        (["--seeds", ","], "--seeds", "no seed given"),
        (["--seeds", "-1"], "--seeds", "out of range"),
        (["--case", '{"N": 0, "dtype": "float32"}'], "--case", "N=0 is not allowed by [params]"),
        (["--only", "nope"], "--only", "unknown check id(s): nope"),
    ]
    for args, option, problem in bad:
        p = kws("check", str(d), "--json", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        err = json.loads(p.stdout)["error"]
        assert err["key"] == option and problem in err["problem"], (args, err)
        assert f"kws: {option}: " in p.stderr and "Traceback" not in p.stderr


def test_device_cuda_without_cuda_is_an_error(tmp_path):
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    if probe.stdout.strip() == "True":
        import pytest

        pytest.skip("this machine has CUDA: --device cuda is valid here")
    p = kws("check", str(write_task(tmp_path)), "--device", "cuda", "--only", "correctness")
    assert p.returncode == 2 and "--device: cuda: no CUDA device" in p.stderr


NOT_JUDGED_PLUGIN = '''\
"""A check that judged one part and could not judge another (as precision-regime does when
its IR step is killed)."""
from workstation.engine.check import Check, register


@register
class HalfLooked(Check):
    """Judged the numerics, could not read the IR."""

    id = "team-half-looked"
    title = "half looked"
    order = 905

    def run(self, ctx):
        ctx.could_not_judge("the IR step was killed at the step limit (30 s)")
        return [self.finding(ctx, "info", "the numerics part matched")]
'''


def test_exit_4_when_a_check_could_not_look_and_strict_is_a_deprecated_no_op(tmp_path):
    """No fail finding, but a check could not look: exit 4, the JSON lists it under
    not_judged (status skip, never pass), the text report's last line says it is not a
    verdict; --strict is still accepted, does nothing and says so on stderr."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "team_half.py").write_text(NOT_JUDGED_PLUGIN)
    info = site / "team_half-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: team-half\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kws.checks]\nhalf = team_half\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    d = write_task(tmp_path / "q")
    cmd = [*KWS, "check", str(d), "--only", "correctness,team-half-looked"]
    p = subprocess.run([*cmd, "--json"], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert p.returncode == 4, p.stderr
    doc = json.loads(p.stdout)
    assert {c["check"]: c["status"] for c in doc["checks"]} == {"correctness": "pass", "team-half-looked": "skip"}
    assert doc["not_judged"] == [{"check": "team-half-looked",
                                  "reason": "the IR step was killed at the step limit (30 s)"}]
    assert doc["complete"] is False
    t = subprocess.run([*cmd, "--strict"], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert t.returncode == 4 and "--strict is deprecated and has no effect" in t.stderr
    assert t.stdout.rstrip().splitlines()[-1] == (
        "not a verdict: 1 check could not look (team-half-looked: the IR step was killed at the step limit (30 s))")
    ok = subprocess.run([*KWS, "check", str(d), "--only", "correctness"], capture_output=True, text=True,
                        cwd=REPO, env=env, timeout=600)
    assert ok.returncode == 0 and "not a verdict" not in ok.stdout


def test_ctrl_c_exits_130_and_prints_nothing_after_it(tmp_path):
    """ctrl+c (SIGINT) during a run: exit 130 (never 1, "a fail finding"), no report, and no
    progress line after the interrupt (stderr on a terminal, where progress is printed).
    The candidate signals that the run is under way by writing a file, then blocks."""
    import pty
    import select
    import signal
    import time

    started = tmp_path / "started"
    d = write_task(tmp_path, candidate=f"import pathlib, time\npathlib.Path({str(started)!r}).write_text('x')\n"
                                       "time.sleep(600)\n\ndef add(x, y):\n    return x + y\n")
    master, slave = pty.openpty()
    p = subprocess.Popen([*KWS, "check", str(d), "--no-sandbox", "--only", "correctness,failure-mismatch"],
                         stdout=subprocess.PIPE, stderr=slave, cwd=REPO, env={**os.environ, "KWS_SANDBOX": "none"})
    os.close(slave)

    def drain() -> str:
        out = b""
        while select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out.decode("utf-8", "replace")

    try:
        end = time.monotonic() + 300
        before = ""
        while not started.exists():
            assert p.poll() is None and time.monotonic() < end, f"the run did not start: {drain()}"
            before += drain()
        before += drain()
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
        after = drain()
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    assert rc == 130, (rc, before, after)
    assert p.stdout is not None and p.stdout.read() == b""  # no report
    assert after.strip() == "", after  # nothing printed after ctrl+c (no "Aborted!", no progress line)
