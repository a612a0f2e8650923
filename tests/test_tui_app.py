"""Pilot tests of the review app, driven by the keyboard only, on replayed check runs."""

from __future__ import annotations

import git
import pytest

from tests.tuikit import (
    burst,
    replay_app,
    run_async,
    tui_env,
    wait_for,
    wait_queue,
    wait_review_ready,
    widget_text,
)
from workstation.records.drafts import load_draft
from workstation.records.parse import load_records

# per keymap: the keys this test presses for each step
KEYS = {
    "default": {"down": "down", "up": "up", "commit": "ctrl+s", "undo": "ctrl+z", "next_hunk": "right_square_bracket"},
    "vim": {"down": "j", "up": "k", "commit": "Z", "undo": "U", "next_hunk": "right_curly_bracket"},
}


async def open_task(pilot, task: str) -> None:
    """Filter the queue down to ``task`` and open it, by keyboard."""
    await pilot.press("slash", *task, "enter")
    table = pilot.app.screen.query_one("QueueTable")
    await wait_for(pilot, lambda: table.current is not None and table.current.id == task, what=f"{task} selected")
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == task, what="the review screen")


async def fill_rubric(pilot, keys: dict[str, str]) -> None:
    """Accept every suggestion, then pick the last (best) value for each field still empty
    by its number (walking the fields with the keymap's down key)."""
    app = pilot.app
    s = app.screen.session
    await pilot.press("alt+5")  # rubric panel
    await pilot.press("A")  # accept all suggestions
    form = app.screen.query_one("RubricForm")
    assert app.focused is form
    for f in s.rubric.choice_fields:
        if not s.values.get(f.key):
            await pilot.press(str(len(f.values)))  # the best value; picking advances to the next field
        else:
            await pilot.press(keys["down"])


@pytest.mark.parametrize("keymap", ["default", "vim"])
@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
@run_async
async def test_full_review_by_keyboard_commits_a_verdict(tmp_path, monkeypatch, keymap, size):
    root = tui_env(monkeypatch, tmp_path)
    keys = KEYS[keymap]
    app = replay_app(root, keymap=keymap)
    async with app.run_test(size=size) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "layernorm-debug")
        await wait_review_ready(pilot)
        screen = app.screen
        assert screen.narrow == (size == (80, 24))
        # read a finding: the cursor followed the first fail finding (correctness's first,
        # sorted on top) without a key; up and down again come back to it
        checks = screen.query_one("ChecksList")
        assert app.focused is checks
        entry = checks.current
        assert entry.check == "correctness" and entry.finding == 0
        await pilot.press(keys["up"], keys["down"])
        entry = checks.current
        assert entry.check == "correctness" and entry.finding == 0
        evidence = widget_text(screen.query_one("#evidence-text"))
        assert "InterpreterError" in evidence and "M=16 N=1000 float32" in evidence
        # the source view jumped to the line the exception came from (candidate.py:51)
        assert screen.query_one("SourceView").target == ("new", 51)
        await pilot.press("m", "P")  # mark it, cite it in the rationale
        assert app.screen.session.rationale.startswith("- correctness (fail):")
        # rubric: accept the suggestions, fill the rest, one undo/redo round trip
        await fill_rubric(pilot, keys)
        s = app.screen.session
        before = dict(s.values)
        await pilot.press(keys["up"], "9")  # overall has 3 values: 9 picks nothing
        assert s.values == before
        await pilot.press(keys["undo"])
        assert s.values != before
        await pilot.press("ctrl+y" if keymap == "default" else "ctrl+r")
        assert s.values == before
        # write to the rationale editor
        await pilot.press("e")
        assert type(app.focused).__name__ == "RationaleArea"
        await pilot.press("end", "ctrl+end")
        await pilot.press(*"Raises on N=1000", "escape")
        assert "Raises on N=1000" in s.rationale
        assert not s.problems()
        # the draft was autosaved on the way
        app.saver.flush()
        d = load_draft(root, "layernorm-debug")
        assert d is not None and d.values["overall"] == "reject"
        await pilot.press(keys["commit"])
        await wait_for(pilot, lambda: "committed verdict" in widget_text(screen.query_one("#rubric-status")),
                       what="the commit")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.row("layernorm-debug") and app.row("layernorm-debug").mine == "reject",
                       what="the queue row to show my verdict")
    repo = git.Repo(root)
    log = repo.git.log("--format=%s%n%b")
    assert "kws verdict: reject layernorm-debug" in log
    assert "Kws-Reviewer: Alice Reviewer <alice@example.com>" in log
    v = load_records(root).verdicts[-1]
    assert v.task == "layernorm-debug" and v.overall == "reject" and "Raises on N=1000" in v.rationale
    assert v.fields["failure_report"] == "wrong" and v.device.startswith("cpu")
    assert load_draft(root, "layernorm-debug") is None


@run_async
async def test_queue_screen_lists_malformed_tasks_filters_and_sorts(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        screen = app.screen
        malformed = widget_text(screen.query_one("#malformed"))
        assert "tasks/broken-kind/task.toml: kind: unknown kind 'refactoring'" in malformed
        ids = [r.id for r in screen.shown]
        assert ids == sorted(ids) and "broken-kind" not in ids and len(ids) == 5
        await pilot.press("slash", *"claimed:fail", "enter")
        assert [r.id for r in screen.shown] == ["layernorm-debug"]
        await pilot.press("x")  # clear the filter
        assert len(screen.shown) == 5
        await pilot.press("s")  # sort by kind
        assert screen.sort_key == "kind" and screen.shown[0].summary.kind == "debugging"
        await pilot.press("S")
        assert screen.shown[0].summary.kind == "translation"
        # next unreviewed moves the cursor; nothing is reviewed yet, so it goes to the next row
        table = screen.query_one("QueueTable")
        first = table.current.id
        await pilot.press("n")
        assert table.current.id != first


@run_async
async def test_checks_stream_in_while_the_rubric_stays_responsive(tmp_path, monkeypatch):
    import threading

    root = tui_env(monkeypatch, tmp_path)
    gate = threading.Event()
    app = replay_app(root, gate=gate)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        s = app.screen.session
        await wait_for(pilot, lambda: bool(s.rows), what="the start event")
        assert s.running and all(not r.done for r in s.rows.values())
        await pilot.press("alt+5", "3")  # the rubric works while every check is still running
        assert s.values.get("reference") == "legitimate", s.values
        gate.set()
        await wait_for(pilot, lambda: s.final_report is not None, what="the run to finish")
        assert not s.running


@run_async
async def test_rerun_one_check_and_all(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        await wait_review_ready(pilot)
        src = app.check_source
        checks = app.screen.query_one("ChecksList")
        target = next(i for i, e in enumerate(checks.entries) if e.check == "unwritten-output" and e.finding is None)
        checks.cursor = target
        await pilot.press("r")
        await wait_for(pilot, lambda: len(src.runs) == 2 and app.screen.session.rows["unwritten-output"].done)
        assert src.runs[-1] == ("relu-unwritten", ("unwritten-output",))
        assert app.screen.session.rows["unwritten-output"].status == "fail"
        await pilot.press("R")
        await wait_for(pilot, lambda: len(src.runs) == 3 and not app.screen.session.running)
        assert src.runs[-1] == ("relu-unwritten", None)


@run_async
async def test_rerun_timing_reruns_the_timing_checks_the_start_event_named(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "bench-honest")
        await wait_review_ready(pilot)
        s, src = app.screen.session, app.check_source
        assert s.timing_checks
        await pilot.press("T")
        await wait_for(pilot, lambda: len(src.runs) == 2 and not s.running, what="the timing re-run")
        assert src.runs[-1] == ("bench-honest", tuple(s.timing_checks))
        assert "median" in widget_text(app.screen.query_one("#timing-text"))


@run_async
async def test_diff_view_hunks_split_files_and_maximise(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        screen = app.screen
        await pilot.press("alt+2")
        view = screen.query_one("SourceView")
        assert app.focused is view and view.diff.old_name == "baseline.py"
        rows = view.diff.hunk_rows(split=False)
        await pilot.press("right_square_bracket")
        assert int(view.scroll_offset.y) in (rows[1], view.max_scroll_y)
        await pilot.press("v")
        assert view.split
        await pilot.press("f")
        assert screen.query_one("DiffPanel").index == 1 and view.diff.is_listing
        await pilot.press("z")
        assert screen.maximized is screen.query_one("#diff")
        await pilot.press("z")
        assert screen.maximized is None
        await pilot.press("z", "escape")  # escape restores too, without leaving the task
        assert screen.maximized is None and app.screen is screen


@run_async
async def test_timing_panel_shows_distribution_and_interval(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "bench-honest")
        await wait_review_ready(pilot)
        text = widget_text(app.screen.query_one("#timing-text"))
        assert "candidate" in text and "baseline" in text and "median" in text
        assert "claimed 50×" in text and "CI" in text
        assert any(ch in text for ch in "▁▂▃▄▅▆▇█")


@run_async
async def test_help_screen_and_keymap_switch(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await pilot.press("f1")
        assert type(app.screen).__name__ == "HelpScreen"
        text = widget_text(app.screen.query_one("#help-text"))
        assert "review.commit" in text and "ctrl+s" in text and "1=illegitimate" in text
        await pilot.press("escape")
        await pilot.press("f2")  # switch to vim
        assert app.keymap_load.name == "vim"
        table = app.screen.query_one("QueueTable")
        start = table.cursor
        await pilot.press("j")
        assert table.cursor == start + 1


@run_async
async def test_a_user_keymap_with_bad_entries_lists_every_problem_until_closed(tmp_path, monkeypatch):
    """A typo in one entry keeps the rest (base = "vim" included); every problem stays on
    screen (file, key, problem) until Esc, however long the reviewer takes."""
    root = tui_env(monkeypatch, tmp_path)
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "keymap.toml").write_text('base = "vim"\n[keys]\n"review.comit" = "ctrl+s"\n'
                                     '"queue.down" = "ctrl+nothing"\n"review.accept_all" = "W"\n')
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        assert app.keymap_load.name == "vim" and app.keymap_load.keys["review.accept_all"] == "W"
        assert type(app.screen).__name__ == "TextScreen"
        text = widget_text(app.screen.query_one("#text-body"))
        assert str(cfg / "keymap.toml") in text
        assert "keys.review.comit: unknown binding id 'review.comit'" in text
        assert "keys.queue.down: 'ctrl+nothing'" in text
        await pilot.pause(0.5)
        await pilot.press("j")  # not a close key: the list stays
        assert type(app.screen).__name__ == "TextScreen"
        await pilot.press("escape")
        assert type(app.screen).__name__ == "QueueScreen"
        table = app.screen.query_one("QueueTable")
        start = table.cursor
        await pilot.press("j")  # vim's down: the base stayed
        assert table.cursor == start + 1


@run_async
async def test_dispute_and_history_from_the_review_screen(tmp_path, monkeypatch):
    from tests.recordkit import BOB, verdict

    root = tui_env(monkeypatch, tmp_path)
    repo = git.Repo(root)
    v = verdict(repo, "matmul-opt", BOB, "accept")
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await pilot.press("alt+6")
        hist = app.screen.query_one("SpecPanel").history_text
        assert v.verdict_id[:8] in hist and "Bob Reviewer" in hist
        await pilot.press("D")
        assert type(app.screen).__name__ == "DisputeScreen"
        # overall is the 7th field: walk down and pick "needs-work" (its 2nd value)
        await pilot.press(*["down"] * 6, "2", "tab")
        await pilot.press(*"Edge tiles are untested at K % 32 != 0", "ctrl+s")
        await wait_for(pilot, lambda: load_records(root).disputes, what="the dispute commit")
        d = load_records(root).disputes[0]
        assert d.verdict_id == v.verdict_id and d.fields == {"overall": "needs-work"}
        await wait_for(pilot, lambda: "on verdict" in app.screen.query_one("SpecPanel").history_text,
                       what="the history to show the dispute")
        await wait_for(pilot, lambda: app.row("matmul-opt").open_disputes == 1, what="the queue flag")


@run_async
async def test_commit_refuses_missing_fields_and_focuses_the_first(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "gemm-cuda2triton")
        await wait_review_ready(pilot)
        await pilot.press("ctrl+s")
        status = widget_text(app.screen.query_one("#rubric-status"))
        assert "not committed" in status and "reference: required" in status
        assert app.focused is app.screen.query_one("RubricForm")
        assert git.Repo(root).git.log("--format=%s").count("kws verdict") == 0


@run_async
async def test_draft_survives_a_new_app(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "gemm-cuda2triton")
        await pilot.press("alt+5", "2", "1")  # reference questionable, tolerance wrong
    # the app is gone (as after a crash or a dropped SSH session): the draft is on disk
    d = load_draft(root, "gemm-cuda2triton")
    assert d is not None and d.values == {"reference": "questionable", "tolerance": "wrong"}
    app2 = replay_app(root)
    async with app2.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        assert app2.row("gemm-cuda2triton").has_draft
        await open_task(pilot, "gemm-cuda2triton")
        assert app2.screen.session.values == {"reference": "questionable", "tolerance": "wrong"}


@run_async
async def test_command_palette_offers_the_actions(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"next unrev")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: getattr(app.screen, "task_id", None) == "bench-honest",
                       what="the next unreviewed task to open")
        await wait_review_ready(pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"switch keymap: vim")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.keymap_load.name == "vim", what="the keymap switch")
        from workstation.tui.commands import KwsCommands

        names = [n for n, _, _ in KwsCommands(app.screen)._commands()]
        for want in ("Next unreviewed task", "Re-run all checks", "Commit verdict", "Dispute a verdict",
                     "Switch keymap: default", "Open task: matmul-opt", "Re-run check: correctness"):
            assert want in names


@run_async
async def test_keys_typed_in_a_burst_reach_the_widget_focused_by_the_key_before(tmp_path, monkeypatch):
    """Over SSH several keystrokes arrive in one packet: "/relu", "5l", "e" + a sentence.
    The keys after one that moves focus must land where the reviewer now types."""
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        burst(app, ["slash", *"relu"])
        await wait_for(pilot, lambda: app.screen.query_one("#filter").value == "relu", what="the filter text")
        burst(app, ["enter"])
        await pilot.pause(0.2)
        burst(app, ["enter"])
        await wait_review_ready(pilot)
        s = app.screen.session
        # alt+5 moves to the rubric, "3" picks a value there, "e" moves to the rationale and
        # the words go into it, not into the rubric form
        burst(app, ["alt+5", "3", "e", *"an unwritten output"])
        await wait_for(pilot, lambda: s.rationale == "an unwritten output", what="the rationale text")
        assert s.values.get("reference") == "legitimate", s.values
        assert set(s.values) == {"reference", "rationale"}
        # escape back to the form, then alt+3 to the checks and "r": a re-run
        checks_runs = len(app.check_source.runs)
        burst(app, ["escape", "down", "down", "down", "down", "down", "alt+3", "r"])
        await wait_for(pilot, lambda: len(app.check_source.runs) == checks_runs + 1, what="the re-run")
        assert "overall" not in s.values


@run_async
async def test_panels_resize_and_switch_to_tabs(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        screen = app.screen
        await pilot.press("alt+1")  # spec
        spec_h = screen.query_one("#spec").size.height
        await pilot.press("plus", "plus")
        await pilot.pause()
        assert screen.query_one("#spec").size.height == spec_h + 4
        right_w = screen.query_one("#col-right").size.width
        await pilot.press("alt+3", "greater_than_sign")  # checks panel: its column gets wider
        await pilot.pause()
        assert screen.query_one("#col-right").size.width == right_w + 4
        await pilot.press("f3")  # tabs by hand on a wide terminal
        await pilot.pause()
        assert screen.narrow and screen.query_one("#spec").has_class("-hidden")
        assert not screen.query_one("#checks").has_class("-hidden")
        await pilot.press("tab")
        assert screen.active == "timing" and screen.query_one("#checks").has_class("-hidden")


@run_async
async def test_a_bundled_queue_folder_opens_as_its_per_user_git_copy(tmp_path, monkeypatch):
    """kws --queue sample_queue_real (a folder inside kws's own repository): opened as a
    per-user git copy, made once, like the first-run sample queue; with an identity the
    title names it, not "no git identity"."""
    from tests.conftest import SAMPLE_QUEUE
    from tests.recordkit import ALICE, isolate, use_identity
    from tests.tuikit import EVENTS
    from workstation.repo.gitqueue import data_dir, default_queue_path, open_queue
    from workstation.review.services import bundled_queue_copy, open_queue_root
    from workstation.review.sources import ReplayCheckSource
    from workstation.tui.app import KwsApp

    isolate(monkeypatch, tmp_path)
    use_identity(monkeypatch, ALICE)
    real = SAMPLE_QUEUE.parent / "sample_queue_real"
    assert bundled_queue_copy(SAMPLE_QUEUE) == default_queue_path()
    assert bundled_queue_copy(tmp_path) is None
    root = open_queue_root(real)
    assert root == data_dir() / "queues" / "sample_queue_real"
    open_queue(root).close()  # a git repository of its own
    assert sorted(p.name for p in (root / "tasks").iterdir()) == sorted(p.name for p in (real / "tasks").iterdir()
                                                                         if p.name != "__pycache__")
    assert open_queue_root(str(real)) == root  # made once, reused
    app = KwsApp(root, check_source=ReplayCheckSource(EVENTS), warm_runner=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot, validated=False)
        title = widget_text(app.screen.query_one("#queue-title"))
        assert ALICE.name in title and "no git identity" not in title, title
