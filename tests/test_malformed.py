"""Malformed input of every class the records issue names: each is a clear error naming
the file and the key (or a warning where the file is valid), and one bad file never stops
the others from loading, in any command or in the app."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest
import tomli_w
from click.testing import CliRunner

from tests.hostile import make_task
from tests.recordkit import (
    ALICE,
    BOB,
    RUBRIC,
    TASK_TOML,
    isolate,
    make_queue,
    use_identity,
    verdict,
)
from tests.tuikit import replay_app, run_async, wait_queue, widget_text
from workstation.cli.main import main as kws
from workstation.records.parse import load_records
from workstation.records.store import commit_dispute
from workstation.schema.problem import Problem
from workstation.task.format import load_task


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


def _task(tmp_path: Path, extra: str = "", cases: str = '[[cases]]\nN = 64\ndtype = "float32"\n',
          title: str = "Task t", params: str = "") -> Path:
    d = tmp_path / "tasks" / "t"
    d.mkdir(parents=True, exist_ok=True)
    text = TASK_TOML.format(id="t").replace('title = "Task t"', f"title = {title!r}".replace("'", '"'))
    text = text.replace('[[cases]]\nN = 64\ndtype = "float32"\n', cases)
    (d / "task.toml").write_text(text + extra + params)
    for f, body in (("spec.md", "# t\n"), ("candidate.py", "def run(x):\n    return x\n"),
                    ("reference.py", "def run(x):\n    return x\n"), ("inputs.py", "def make_inputs(c, d, s):\n    return ()\n")):
        (d / f).write_text(body)
    return d


@pytest.mark.parametrize("extra, key, words", [
    ("[tolerance]\nrtol = nan\n", "tolerance.rtol", "got nan"),
    ("[tolerance]\natol = inf\n", "tolerance.atol", "must be finite"),
    ("[tolerance.float16]\nrtol = nan\n", "tolerance.float16.rtol", "got nan"),
    ("[tolerance]\nulp = 2.5\n", "tolerance.ulp", "whole number of ULPs"),
    ("[params]\nN = { min = -4, max = 64 }\n", "params.N.min", "must be >= 0, got -4"),
])
def test_task_toml_values_that_were_accepted_silently(tmp_path, extra, key, words):
    d = _task(tmp_path, extra)
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert (ei.value.file, ei.value.key) == (d / "task.toml", key) and words in ei.value.problem


def test_task_toml_text_caps_and_case_shapes(tmp_path):
    d = _task(tmp_path, title="x" * 300)
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert ei.value.key == "title" and "at most 200 characters" in ei.value.problem
    (d / "task.toml").write_text("title = '" + "x" * (30 << 20) + "'\n")  # the 30 MB title
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert "larger than the 1048576-byte limit" in ei.value.problem
    d = _task(tmp_path, cases='[[cases]]\nN = 64\nM = 8\ndtype = "float32"\n[[cases]]\nN = 32\ndtype = "float32"\n')
    with pytest.raises(Problem) as ei:
        load_task(d)
    assert ei.value.key == "cases[1].M" and "cases[0] has M" in ei.value.problem
    d = _task(tmp_path, cases='[[cases]]\nN = 64\ndtype = "float32"\n[[cases]]\nN = 64\ndtype = "float32"\n',
              extra="colour = 'red'\n")
    t = load_task(d)  # valid under the format: warnings, and the duplicate is dropped
    assert len(t.cases) == 1
    assert {(w.key, w.problem.split(" (")[0]) for w in t.warnings} == {
        ("cases[1]", "the same case as cases[0]"), ("claims.colour", "unknown key")}


def test_kws_queue_reports_task_and_queue_toml_warnings(env):
    root = env / "q"
    _task(root, extra="colour = 'red'\n")
    (root / "queue.toml").write_text('name = "q"\nshiny = true\n')
    r = CliRunner().invoke(kws, ["queue", "--queue", str(root)])
    assert r.exit_code == 0, r.output
    assert "warning: " + str(root / "queue.toml") + ": shiny: unknown key" in r.output
    assert "tasks/t/task.toml: claims.colour: unknown key" in r.output


# -------------------------------------------------------------------------------------------
# records


def _commit(repo: git.Repo, rel: str, data: dict | str) -> None:
    p = Path(repo.working_tree_dir) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data if isinstance(data, str) else tomli_w.dumps(data))
    repo.git.add("-f", rel)
    repo.git.commit("-q", "--no-verify", "-m", f"plant {rel}")


def test_record_classes_that_were_accepted_silently(env):
    repo = make_queue(env / "q")
    root = Path(repo.working_tree_dir)
    v = verdict(repo, "alpha", ALICE, "reject", correctness="incorrect")
    rs = load_records(repo)
    d = commit_dispute(repo, rs.verdict(v.verdict_id), {"correctness": "correct"}, "fine", RUBRIC, identity=BOB)
    base_v = __import__("tomllib").loads((root / v.path).read_text())
    base_d = __import__("tomllib").loads((root / d.path).read_text())
    _commit(repo, "disputes/alpha/orphan.toml", {**base_d, "dispute_id": "0a0a0a0a-1", "verdict_id": "feedf00d-1"})
    _commit(repo, "resolutions/alpha/orphan.toml", {
        "schema": 1, "record": "resolution", "resolution_id": "0b0b0b0b-1", "dispute_id": "feedf00d-2",
        "verdict_id": v.verdict_id, "task": "alpha", "timestamp": base_v["timestamp"], "outcome": "upheld",
        "rationale": "r", "reviewer": base_v["reviewer"]})
    future = base_v["timestamp"].replace(year=9999)
    _commit(repo, "verdicts/alpha/future.toml", {**base_v, "verdict_id": "0c0c0c0c-1", "timestamp": future})
    _commit(repo, "verdicts/alpha/maybe.toml",
            {**base_v, "verdict_id": "0d0d0d0d-1", "fields": {**base_v["fields"], "correctness": "mostly"}})
    _commit(repo, "disputes/alpha/maybe.toml", {**base_d, "dispute_id": "0e0e0e0e-1", "fields": {"tolerance": "meh"}})
    rs = load_records(repo)
    # a verdict dated in the future is kept where its commit put it (the history orders
    # records, not their clocks) and flagged as a warning
    assert [x.verdict_id for x in rs.verdicts] == [v.verdict_id, "0c0c0c0c-1"]
    assert [x.dispute_id for x in rs.disputes] == [d.dispute_id] and rs.open_disputes() == rs.disputes
    by = {(p.file.as_posix(), p.key): p.problem for p in rs.problems}
    warned = {(p.file.as_posix(), p.key): p.problem for p in rs.warnings}
    assert "disputes verdict feedf00d-1, which is not among" in by[("disputes/alpha/orphan.toml", "verdict_id")]
    assert "resolves dispute feedf00d-2, which is not among" in by[("resolutions/alpha/orphan.toml", "dispute_id")]
    assert "is in the future" in warned[("verdicts/alpha/future.toml", "timestamp")]
    assert ("verdicts/alpha/future.toml", "timestamp") not in by
    assert "unknown value 'mostly' for rubric kernel-review" in by[("verdicts/alpha/maybe.toml", "fields.correctness")]
    assert "unknown value 'meh'" in by[("disputes/alpha/maybe.toml", "fields.tolerance")]


# -------------------------------------------------------------------------------------------
# one deeply nested file, everywhere

_DEEP = "x = " + "[" * 3000 + "]" * 3000 + "\n"


@pytest.fixture
def nested(env, monkeypatch):
    """A queue whose alpha task, one verdict and one dispute are nested 3000 levels deep,
    next to a good verdict on beta and a good task beta."""
    use_identity(monkeypatch, ALICE)
    repo = make_queue(env / "q")
    root = Path(repo.working_tree_dir)
    (root / "tasks" / "beta" / "inputs.py").write_text("def make_inputs(case, device, seed):\n    return ()\n")
    repo.git.add("-A")
    repo.git.commit("-q", "-m", "beta loads")
    good = verdict(repo, "beta", ALICE, "accept")
    (root / "tasks" / "alpha" / "task.toml").write_text(_DEEP)
    repo.git.commit("-q", "-am", "nested task")
    _commit(repo, "verdicts/beta/deep.toml", _DEEP)
    _commit(repo, "disputes/beta/deep.toml", _DEEP)
    (root / "gold").mkdir()
    (root / "gold" / "beta.toml").write_text('overall = "accept"\n')
    return repo, good


def test_a_deeply_nested_file_is_skipped_by_every_command(nested):
    repo, good = nested
    q = repo.working_tree_dir
    run = CliRunner().invoke
    where = "nested 3000 levels deep (at most 32)"
    r = run(kws, ["queue", "--queue", q])
    assert r.exit_code == 2 and "beta" in r.output and f"tasks/alpha/task.toml: arrays or inline tables {where}" in r.output
    r = run(kws, ["history", "beta", "--queue", q])
    assert r.exit_code == 0, r.output
    assert good.verdict_id[:8] in r.output and f"skipped verdicts/beta/deep.toml: arrays or inline tables {where}" in r.output
    r = run(kws, ["report", "beta", "--queue", q])
    assert r.exit_code == 0, r.output
    assert good.verdict_id[:8] in r.output and "verdicts/beta/deep.toml" in r.output
    r = run(kws, ["calibrate", "--queue", q])
    assert r.exit_code == 0, r.output
    assert "disputes/beta/deep.toml" in r.output or "verdicts/beta/deep.toml" in r.output
    r = run(kws, ["doctor", "--queue", q])
    assert r.exit_code == 1 and "tasks/alpha/task.toml" in r.output and "disputes/beta/deep.toml" in r.output
    r = run(kws, ["history", "alpha", "--queue", q])
    assert r.exit_code == 0, r.output


def test_a_nested_queue_toml_is_reported_and_the_tasks_still_list(env):
    repo = make_queue(env / "q")
    (Path(repo.working_tree_dir) / "queue.toml").write_text(_DEEP)
    r = CliRunner().invoke(kws, ["queue", "--queue", repo.working_tree_dir])
    assert r.exit_code == 2 and "alpha" in r.output and "queue.toml: arrays or inline tables nested" in r.output


@run_async
async def test_the_app_skips_a_deeply_nested_file_with_its_message(nested):
    repo, good = nested
    app = replay_app(Path(repo.working_tree_dir))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        text = widget_text(app.screen.query_one("#malformed"))
        assert "tasks/alpha/task.toml: arrays or inline tables nested 3000 levels deep" in text
        assert "verdicts/beta/deep.toml" in text and "disputes/beta/deep.toml" in text
        assert [r.id for r in app.screen.shown] == ["beta"]
        assert app.screen.shown[0].verdicts == 1


# -------------------------------------------------------------------------------------------
# what only a job child can see


def test_out_args_beyond_the_inputs_and_an_oversized_case_are_task_problems(env, monkeypatch):
    from workstation.engine.run import run_checks
    from workstation.runner import Runner

    root = env / "q"
    t1 = make_task(root, "outargs", "def add(x, y):\n    return x + y\n", entry_extra="out_args = [5]")
    big = ("import torch\n\ndef make_inputs(case, device, seed):\n    g = torch.Generator().manual_seed(seed)\n"
           "    x = torch.randn(case['N'], case['N'], generator=g)\n    return x.to(device), x.to(device)\n")
    t2 = make_task(root, "bigcase", "def add(x, y):\n    return x + y\n", inputs=big,
                   cases=[{"N": 65536, "dtype": "float32"}])
    (t2 / "task.toml").write_text((t2 / "task.toml").read_text().replace("max = 4096", "max = 100000"))
    from workstation.task.format import load_task as lt

    with Runner(device="cpu") as runner:
        r1 = run_checks(lt(t1), runner, only=["correctness"], seeds=[0])
        r2 = run_checks(lt(t2), runner, only=["correctness"], seeds=[0])
    c1 = {c.check: c for c in r1.results}["correctness"]
    c2 = {c.check: c for c in r2.results}["correctness"]
    assert c1.status == "skip" and "task.toml: entry.out_args: index 5 is beyond the 2 input(s)" in c1.reason
    assert c2.status == "skip" and "task.toml: cases: case {N = 65536" in c2.reason and "over the input budget" in c2.reason
    assert not r1.findings and not r2.findings  # never charged to the candidate


# -------------------------------------------------------------------------------------------
# keymaps and rubrics


def test_resolve_keymap_never_raises(tmp_path, monkeypatch):
    from workstation.tui.keymap import resolve_keymap

    d = tmp_path / "keymap.toml"
    d.mkdir()
    r = resolve_keymap(None, user_file=d)
    assert r.name == "default" and "is a directory, not a keymap file" in str(r.problems[0])
    f = tmp_path / "k.toml"
    f.write_text('[keys]\n"queue.down" = "j"\n')

    def denied(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "stat", denied)
    r = resolve_keymap(None, user_file=f)
    assert r.name == "default" and "Permission denied" in str(r.problems[0])


def test_a_non_utf8_rubric_names_its_file(tmp_path):
    from workstation.rubric.model import find_rubric

    (tmp_path / "rubrics").mkdir()
    bad = tmp_path / "rubrics" / "mine.toml"
    bad.write_bytes(b"id = 'mine'\ntitle = 'caf\xe9'\n")
    with pytest.raises(Problem) as ei:
        find_rubric("mine", tmp_path)
    assert ei.value.file == bad and "not UTF-8 text (byte 0xe9" in ei.value.problem
    assert os.fspath(bad) in str(ei.value)
