"""The reviewer's day, round two (issue "no dead ends, no lost work"): a finished run is
shown again on reopen instead of re-running the battery, the help screen shows the keys
the keymap binds now, a "not committed" line never goes stale, ``D`` before the records
are read waits for them, the queue keeps task ids whole at 80 columns, the palette keeps
Textual's own entries apart, quitting never waits on a check server that is still starting,
the Benchmark field is "not applicable" to a task with no benchmark and no claim, and a
task whose files are slow to read paints its review screen first (issue 30, latency)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.recordkit import ALICE
from tests.tuikit import EVENTS, replay_app, run_async, tui_env, wait_for, wait_queue, widget_text
from workstation.records.drafts import Draft, save_draft


async def open_task(pilot, task: str) -> None:
    await pilot.press("slash", *task, "enter")
    table = pilot.app.screen.query_one("QueueTable")
    await wait_for(pilot, lambda: table.current is not None and table.current.id == task, what=f"{task} selected")
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == task, what="the review screen")


def _stored_report(root: Path, task: str, **changes) -> dict:
    """The fixture run's final report, as the draft of a finished run of ``task``'s version
    in ``HEAD`` would hold it."""
    from workstation.review import services

    events = json.loads((Path(EVENTS) / f"{task}.json").read_text())["events"]
    report = next(d["report"] for k, d in events if k == "done")
    report = {**report, "task_tree": services.task_tree(root, task).tree, **changes}
    return report


def _draft(root: Path, task: str, report: dict) -> None:
    save_draft(Draft(task=task, queue=str(root), values={"correctness": "incorrect"}, rubric_id="kernel-review",
                     rubric_version=1, task_tree=report["task_tree"], report=report,
                     suggested={"correctness": "from-complete-run"}))


@run_async
async def test_reopening_a_task_shows_the_drafts_finished_run_instead_of_running_again(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    _draft(root, "relu-unwritten", _stored_report(root, "relu-unwritten"))
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        s = app.screen.session
        await wait_for(pilot, lambda: s.source == "stored", what="the stored run shown")
        await pilot.pause(0.3)
        assert app.check_source.runs == []  # nothing re-ran
        assert s.rows["unwritten-output"].status == "fail"
        assert "stored run (R re-runs)" in widget_text(app.screen.query_one("#checks-status"))
        await pilot.press("R")  # the key to re-run replaces it with a live run
        await wait_for(pilot, lambda: app.check_source.runs, what="the re-run")
        await wait_for(pilot, lambda: s.source == "run" and s.rows and not s.running, what="the live run")


@run_async
async def test_a_stored_run_of_another_kws_version_is_not_reused(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    report = _stored_report(root, "relu-unwritten")
    _draft(root, "relu-unwritten", {**report, "versions": {**report["versions"], "kws": "0.0.9"}})
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        await wait_for(pilot, lambda: app.check_source.runs, what="a new run")
        assert app.screen.session.source == "run"


def test_reuse_refusal_names_what_differs():
    from workstation.engine.context import DEFAULT_SEEDS
    from workstation.review.services import APP_SEEDS, TaskTree, reuse_refusal

    assert tuple(APP_SEEDS) == tuple(DEFAULT_SEEDS)
    ok = {"task_tree": "t1", "versions": {"kws": "9"}, "seeds": list(APP_SEEDS)}
    assert reuse_refusal(ok, TaskTree("t1"), "9") == ""
    assert "changed" in reuse_refusal(ok, TaskTree("t2"), "9")
    assert "clean" in reuse_refusal(ok, TaskTree("t1", ("tasks/x/candidate.py",)), "9")
    assert "kws 9" in reuse_refusal(ok, TaskTree("t1"), "10")
    assert "seeds" in reuse_refusal({**ok, "seeds": [7]}, TaskTree("t1"), "9")
    assert reuse_refusal(None, TaskTree("t1"), "9")


@run_async
async def test_help_shows_the_remapped_commit_key_and_wraps_instead_of_cutting(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "keymap.toml").write_text('[keys]\n"review.commit" = "ctrl+w"\n')
    app = replay_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_queue(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        text = widget_text(app.screen.query_one("#help-text"))
        grammar = text.split("Key grammar", 1)[1].split("Everywhere", 1)[0]
        assert "ctrl+w" in grammar and "ctrl+s  commit the verdict" not in grammar
        # a long description is wrapped whole, not cut at the pane's edge
        assert "the report is not final" in " ".join(text.split())


@run_async
async def test_the_not_committed_line_follows_the_fields(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "bench-honest")
        s = app.screen.session
        await wait_for(pilot, lambda: s.rows and not s.running, what="the run")
        await pilot.press("ctrl+s")
        status = app.screen.query_one("#rubric-status")
        await wait_for(pilot, lambda: "not committed: " in widget_text(status), what="the problems")
        before = widget_text(status)
        await pilot.press("alt+5", "A")  # accept every suggestion: fewer problems
        form = app.screen.query_one("RubricForm")
        for i, f in enumerate(s.rubric.choice_fields):
            if not s.values.get(f.key):
                form.cursor = i
                await pilot.press(str(len(f.values)))
        if not s.rationale:
            await pilot.press("e", *"looked at it", "escape")
        await wait_for(pilot, lambda: not s.problems(), what="every field filled")
        after = widget_text(status)
        assert before != after and "not committed" not in after


@run_async
async def test_dispute_before_the_records_are_read_waits_for_them(tmp_path, monkeypatch):
    import git

    from tests.recordkit import BOB, verdict

    root = tui_env(monkeypatch, tmp_path)
    verdict(git.Repo(root), "relu-unwritten", BOB, "accept")
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        scr = app.screen
        await wait_for(pilot, lambda: scr.history_read, what="the history")  # no answer left in flight
        scr.history_read = False  # as right after opening: the history worker has not answered
        scr.verdicts = []
        await pilot.press("D")
        assert type(app.screen).__name__ == "ReviewScreen" and scr._dispute_waiting
        scr.load_history()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DisputeScreen", what="the dispute dialog")


def test_queue_table_keeps_task_ids_whole_at_80_columns():
    from workstation.tui.widgets.queue_table import QueueTable

    t = QueueTable()
    t._id_width = len("gelu-ref-imports-candidate")
    cols = t._layout(80)
    assert sum(c.width for c in cols) <= 80
    task = next(c for c in cols if c.title == "task")
    assert task.width - 1 > len("gelu-ref-imports-candidate")
    assert {"claims", "reserved by", "my verdict", "screen"} <= {c.title for c in cols}
    wide = t._layout(200)
    assert {"backend", "disp"} <= {c.title for c in wide}


@run_async
async def test_palette_keeps_textuals_entries_apart(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_queue(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles and all(t.startswith("Textual: ") for t in titles)
        assert not {"Quit", "Keys", "Maximize", "Textual: Quit", "Textual: Keys"} & set(titles)
        assert "(no filter" in app.screen.query_one("#filter").placeholder


def test_closing_the_check_source_releases_a_warm_up_still_waiting():
    from workstation.review.sources import RunnerCheckSource

    src = RunnerCheckSource()
    src._send = lambda obj: None  # a server that is still importing: it never answers
    got: list[BaseException] = []

    def warm() -> None:
        try:
            src.warm_up()
        except RuntimeError as e:
            got.append(e)

    th = threading.Thread(target=warm)
    th.start()
    src.close()
    th.join(10)
    assert not th.is_alive() and got and "closed" in str(got[0])


def test_checks_list_puts_a_space_after_running():
    from workstation.review.session import CheckRow
    from workstation.tui.widgets.checks_list import ChecksList

    lst = ChecksList()
    row = CheckRow("correctness")
    row.status, row.started = "running", 0.0
    lst.set_checks([row])
    text = "".join(seg.text for seg in lst.render_row(0, 80, False))
    assert "running correctness" in text


@pytest.mark.parametrize("statuses, expected", [
    ({"benchmark-bias": "skip", "speedup-claim": "skip", "no-regression": "pass"}, "not-applicable"),
    ({"benchmark-bias": "pass", "speedup-claim": "skip", "no-regression": "pass"}, "valid"),
    ({"benchmark-bias": "skip", "speedup-claim": "skip", "no-regression": "fail"}, "invalid"),
])
def test_benchmark_is_not_applicable_without_a_benchmark_or_a_claim(statuses, expected):
    from workstation.rubric.model import find_rubric
    from workstation.rubric.suggest import suggest

    rubric = find_rubric("kernel-review")
    checks = [{"check": c, "status": st, "seconds": 0.0, "reason": ""} for c, st in statuses.items()]
    findings = [{"check": c, "severity": "fail", "summary": "x"} for c, st in statuses.items() if st == "fail"]
    assert suggest(rubric, findings, checks)["benchmark"].value == expected


@run_async
async def test_title_bars_count_records_not_pushed_until_a_sync(tmp_path, monkeypatch):
    """A clone with a remote and a dispute committed here only: both title bars say "1
    records not pushed" (counted in the records worker); f6 (sync) sends it and the count
    goes away."""
    import subprocess

    import git

    from tests.recordkit import BOB, verdict
    from workstation.records.store import commit_dispute
    from workstation.records.sync import sync

    root = tui_env(monkeypatch, tmp_path)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    repo = git.Repo(root)
    repo.git.remote("add", "origin", str(bare))
    repo.git.push("-q", "-u", "origin", "main")
    v = verdict(repo, "relu-unwritten", ALICE, "accept")
    sync(repo)  # the verdict is on the remote: only the dispute below is not
    commit_dispute(repo, v, {"correctness": "incorrect"}, "it writes nothing", identity=BOB)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        assert app.queue.unpushed == 1
        assert "1 records not pushed" in widget_text(app.screen.query_one("#queue-title"))
        await open_task(pilot, "relu-unwritten")
        title = app.screen.query_one("#review-title")
        assert "1 records not pushed" in widget_text(title)
        await pilot.press("f6")
        await wait_for(pilot, lambda: app.queue.unpushed == 0, what="the sync")
        await pilot.pause(0.1)
        assert "not pushed" not in widget_text(title)
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "QueueScreen", what="the queue")
        assert "not pushed" not in widget_text(app.screen.query_one("#queue-title"))
    assert repo.git.rev_parse("main") == repo.git.rev_parse("origin/main")


@run_async
async def test_a_slow_task_view_paints_the_screen_first_and_fills_the_spec_in_after(tmp_path, monkeypatch):
    """The task's files are read and diffed in a worker (issue 30: the UI thread never
    waits on them): while it is still at work the review screen is up with its
    placeholders and takes keys; when it is done, the spec and sources appear and the
    checks run."""
    import workstation.tui.screens.review as review

    root = tui_env(monkeypatch, tmp_path)
    gate = threading.Event()
    real = review.load_task_view

    def slow(task_dir):
        gate.wait(30)
        return real(task_dir)

    monkeypatch.setattr(review, "load_task_view", slow)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        screen = app.screen
        await pilot.pause(0.2)
        assert not screen.files_ready
        assert "loading the spec" in widget_text(screen.query_one("#spec-md"))
        await pilot.press("alt+5")  # keys work meanwhile
        assert app.focused is screen.query_one("RubricForm")
        gate.set()
        await wait_for(pilot, lambda: screen.files_ready, what="the spec and sources")
        await pilot.pause(0.1)
        assert "ReLU" in widget_text(screen.query_one("#spec-md"))
        await wait_for(pilot, lambda: screen.session.final_report is not None, what="the check run")
