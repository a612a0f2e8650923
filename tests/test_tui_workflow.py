"""Pilot tests of a reviewer's day, keyboard only, on replayed check runs: no verdict on a
half-run battery without an explicit confirmation, the palette's actions on the screen
under it, evidence and every panel by keyboard, maximise, the key grammar, commit and
next, reserve / release / sync with their outcome, resolve, calibration and report views,
no draft until the reviewer changes something, the identity notice."""

from __future__ import annotations

import subprocess
import threading

import git

from tests.recordkit import BOB, CAROL, RUBRIC, verdict
from tests.tuikit import (
    replay_app,
    run_async,
    tui_env,
    wait_for,
    wait_queue,
    wait_review_ready,
    widget_text,
)
from workstation.records.drafts import draft_path, load_draft
from workstation.records.parse import load_records


async def open_task(pilot, task: str) -> None:
    await pilot.press("slash", *task, "enter")
    table = pilot.app.screen.query_one("QueueTable")
    await wait_for(pilot, lambda: table.current is not None and table.current.id == task, what=f"{task} selected")
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == task, what="the review screen")


async def complete_rubric(pilot) -> None:
    """alt+5, accept every suggestion (A), then Enter through the fields, giving the ones
    kws cannot suggest their last (best) value by number, and a rationale."""
    app = pilot.app
    s = app.screen.session
    await pilot.press("alt+5", "A")
    form = app.screen.query_one("RubricForm")
    form.cursor = 0
    for f in s.rubric.choice_fields:
        await pilot.press("enter" if s.values.get(f.key) else str(len(f.values)))
    if s.values.get("overall") == "reject" or not s.rationale:
        await pilot.press("e", *"see the findings", "escape")


@run_async
async def test_commit_on_a_half_run_battery_asks_first_and_records_what_had_not_finished(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    gate = threading.Event()
    app = replay_app(root, gate=gate, gate_before="edge-shapes")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        s = app.screen.session
        await wait_for(pilot, lambda: s.rows.get("reference-suspect") is not None and s.rows["reference-suspect"].done,
                       what="the checks before edge-shapes")
        assert s.rows["edge-shapes"].status in ("queued", "running")
        await complete_rubric(pilot)
        assert not s.problems(), s.problems()
        assert s.suggested["edge_coverage"] == "from-incomplete-run"
        form_text = widget_text(app.screen.query_one("RubricForm"))
        assert "kws: covered…" in form_text  # a suggestion from a run that has not finished
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", what="the confirmation")
        text = widget_text(app.screen.query_one("#confirm-reasons"))
        assert "not finished" in text and "edge-shapes" in text
        await pilot.press("x", "space", "y")  # no stray key commits
        assert type(app.screen).__name__ == "ConfirmScreen"
        await pilot.press("escape")
        assert type(app.screen).__name__ == "ReviewScreen"
        assert "not committed (cancelled)" in widget_text(app.screen.query_one("#rubric-status"))
        assert not load_records(root).verdicts
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", what="the confirmation again")
        await pilot.press("enter")
        await wait_for(pilot, lambda: load_records(root).verdicts, what="the commit")
        v = load_records(root).verdicts[0]
        assert "edge-shapes" in v.unfinished_checks and v.suggested["edge_coverage"] == "from-incomplete-run"
        assert v.checks_complete is False
        gate.set()
        await wait_for(pilot, lambda: s.final_report is not None, what="the rest of the run")
        await pilot.pause(0.2)
    # the committed session saved no new draft when the remaining checks came in
    assert load_draft(root, "relu-unwritten") is None


@run_async
async def test_commit_with_a_not_judged_check_asks_first_and_the_verdict_records_it(tmp_path, monkeypatch):
    """A battery that finished but where precision-regime could not look (its IR step was
    killed): kws suggests no passing tolerance value from it, ctrl+s asks for the same
    confirmation as a half-run battery, and the verdict names the check and why."""
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    why = "the Triton IR was not examined: the AOT step was killed at the step limit (30 s)"
    stream = app.check_source.streams["relu-unwritten"]["events"]
    for kind, data in stream:
        if kind == "check_finished" and data["result"]["check"] == "precision-regime":
            data["result"].update(status="skip", reason=why, not_judged=why, findings=[
                {"check": "precision-regime", "severity": "info", "summary": why, "evidence": {}, "repro": ""}])
        if kind == "done":
            rep = data["report"]
            rep["not_judged"] = [{"check": "precision-regime", "reason": why}]
            for c in rep["checks"]:
                if c["check"] == "precision-regime":
                    c.update(status="skip", reason=why)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        s = app.screen.session
        await wait_for(pilot, lambda: s.final_report is not None, what="the check run")
        assert s.rows["precision-regime"].not_judged == why
        sug = s.suggestions()["tolerance"]
        assert sug.outcome == "not-judged" and sug.value is None  # never "appropriate" on what was not looked at
        await complete_rubric(pilot)
        assert not s.problems(), s.problems()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", what="the confirmation")
        text = widget_text(app.screen.query_one("#confirm-reasons"))
        assert "could not look" in text and "precision-regime" in text
        await pilot.press("escape")
        assert not load_records(root).verdicts
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", what="the confirmation again")
        await pilot.press("enter")
        await wait_for(pilot, lambda: load_records(root).verdicts, what="the commit")
        v = load_records(root).verdicts[0]
        assert dict(v.not_judged) == {"precision-regime": why}
        assert v.checks_complete is False and "tolerance" not in v.suggested
        await pilot.pause(0.1)


@run_async
async def test_a_finding_that_changes_after_acceptance_flags_the_field_and_the_commit_asks(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    gate = threading.Event()
    app = replay_app(root, gate=gate, gate_before="edge-shapes")
    fails = {"check": "edge-shapes", "status": "fail", "seconds": 1.0, "reason": "", "findings": [
        {"check": "edge-shapes", "severity": "fail", "summary": "case M=1 N=3: every element wrong",
         "evidence": {}, "repro": "kws check tasks/relu-unwritten --only edge-shapes"}]}
    stream = app.check_source.streams["relu-unwritten"]["events"]
    for kind, data in stream:
        if kind == "check_finished" and data["result"]["check"] == "edge-shapes":
            data["result"] = fails
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        s = app.screen.session
        await wait_for(pilot, lambda: s.rows.get("reference-suspect") is not None and s.rows["reference-suspect"].done)
        await pilot.press("alt+5", "A")
        assert s.values["edge_coverage"] == "covered"
        gate.set()
        await wait_for(pilot, lambda: s.final_report is not None, what="the run")
        await pilot.pause(0.1)
        assert "edge_coverage" in s.reflagged
        assert "⚑ kws" in widget_text(app.screen.query_one("RubricForm"))
        await complete_rubric(pilot)  # Enter on each field: confirms the flagged one as it is
        assert not s.reflagged
        s.accept_suggestion("edge_coverage")  # now "fails": the complete run's suggestion
        assert s.suggested["edge_coverage"] == "from-complete-run"


@run_async
async def test_the_palette_runs_review_actions_on_the_screen_under_it(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "gemm-cuda2triton")
        await wait_review_ready(pilot)
        review = app.screen
        for query, check in (
            ("commit verdict", lambda: "not committed" in widget_text(review.query_one("#rubric-status"))),
            ("toggle unified/split", lambda: review.query_one("SourceView").split),
            ("show history", lambda: review.query_one("SpecPanel").showing == "history"),
            ("accept all suggestions", lambda: bool(review.session.values)),
            ("set overall: needs work", lambda: review.session.values.get("overall") == "needs-work"),
        ):
            await pilot.press("ctrl+p")
            await pilot.press(*query)
            await pilot.pause(0.4)
            await pilot.press("enter")
            await wait_for(pilot, check, what=f"the palette's {query!r}")
            assert app.screen is review
        # the help lists every action the palette offers, from the review screen too
        await pilot.press("f1")
        text = widget_text(app.screen.query_one("#help-text"))
        for needle in ("review.commit_next", "review.resolve", "app.sync", "app.calibration", "queue.reserve",
                       "checks.open", "rubric.pick_1", "Enter", "alt+1..7"):
            assert needle in text, needle


@run_async
async def test_evidence_scrolls_by_keyboard_and_every_panel_maximises_to_the_screen(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "layernorm-debug")
        await wait_review_ready(pilot)
        screen = app.screen
        await pilot.press("down")  # the correctness failure: a traceback, then the repro line
        pane = screen.query_one("#evidence")
        assert pane.max_scroll_y > 0, "the evidence should be longer than its pane"
        await pilot.press("space")  # pages the evidence, the cursor stays on the finding
        assert pane.scroll_y > 0 and app.focused is screen.query_one("ChecksList")
        await pilot.press("enter")
        assert app.focused is pane
        await pilot.press("end")
        await pilot.pause()
        assert pane.scroll_y == pane.max_scroll_y
        evidence = widget_text(screen.query_one("#evidence-text")).rstrip().splitlines()
        repro = next(i for i, ln in enumerate(evidence) if "kws check" in ln)  # the repro, the last entry
        assert pane.scroll_y <= repro < pane.scroll_y + pane.size.height  # now on screen
        await pilot.press("home")
        await pilot.pause()
        assert pane.scroll_y == 0
        await pilot.press("escape")  # back to the list, not to the queue
        assert app.focused is screen.query_one("ChecksList") and app.screen is screen
        for key, panel in (("alt+1", "#spec"), ("alt+2", "#diff"), ("alt+3", "#checks"), ("alt+4", "#timing"),
                           ("alt+5", "#rubric"), ("alt+6", "#spec")):
            await pilot.press(key, "z")
            await pilot.pause()
            p = screen.query_one(panel)
            assert screen.maximized is p, key
            assert p.size.height >= screen.size.height - 3 and p.size.width >= screen.size.width - 2, (key, p.size)
            await pilot.press("z")
            await pilot.pause()
            assert screen.maximized is None
        await pilot.press("alt+4", "z", "escape")  # Esc restores too, and stays on the task
        await pilot.pause()
        assert screen.maximized is None and app.screen is screen
        assert screen.query_one("#timing").outer_size.height == screen.sizes["timing"]  # its own height again


@run_async
async def test_key_grammar_digits_pick_enter_confirms_and_nothing_is_saved_before_a_change(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        app.saver.flush()
        assert load_draft(root, "matmul-opt") is None and not draft_path(root, "matmul-opt").exists()
        assert "matmul-opt" not in app.queue.drafts
        s = app.screen.session
        await pilot.press("2")  # not in the rubric: digits pick nothing there
        assert not s.values
        await pilot.press("alt+5", "1")  # reference: its 1st value
        assert s.values == {"reference": "illegitimate"}
        assert app.screen.query_one("RubricForm").cursor == 1  # and on to the next field
        await pilot.press("enter")  # tolerance: kws's suggestion
        assert s.values["tolerance"] == s.suggestions()["tolerance"].value
        assert s.suggested["tolerance"] == "from-complete-run"
        await pilot.press("up", "up", "backspace")
        assert "reference" not in s.values
        app.saver.flush()
        assert load_draft(root, "matmul-opt") is not None  # the reviewer changed something
    app2 = replay_app(root)
    async with app2.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "bench-honest")
        await wait_review_ready(pilot)
        await pilot.press("escape")
        app2.saver.flush()
        assert load_draft(root, "bench-honest") is None  # opened, looked at, left: no ✎
        assert not app2.row("bench-honest").has_draft


@run_async
async def test_commit_and_next_opens_the_next_unreviewed_task(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await complete_rubric(pilot)
        # the filter (the search that found matmul-opt) shows only this task: ctrl+n clears
        # it, says so, and goes on in the whole queue (sorted by id: the task after it)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: getattr(app.screen, "task_id", None) not in (None, "matmul-opt"),
                       what="the next task")
        nxt = app.screen.task_id
        assert nxt == "relu-unwritten"
        assert any("no task left in the filter 'matmul-opt': cleared it, on to relu-unwritten" in n.message
                   for n in app._notifications)
        qs = app._queue_screen()
        assert qs.filter_text == "" and len(qs.shown) == 5
        assert qs.query_one("#filter").value == ""
        assert [v.task for v in load_records(root).verdicts] == ["matmul-opt"]
        # the whole queue from here on: relu-unwritten is the last by id, so ctrl+n wraps
        # around to the first, and N then moves on without committing
        await wait_review_ready(pilot)
        await complete_rubric(pilot)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: getattr(app.screen, "task_id", None) == "bench-honest",
                       what="the first task, wrapping around")
        assert [v.task for v in load_records(root).verdicts] == ["matmul-opt", "relu-unwritten"]
        await wait_for(pilot, lambda: app.row("relu-unwritten").mine is not None, what="the queue row")
        await pilot.press("N")
        await wait_for(pilot, lambda: getattr(app.screen, "task_id", None) == "gemm-cuda2triton",
                       what="the task after")

@run_async
async def test_reserve_release_sync_calibration_and_report_from_the_queue(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    repo = git.Repo(root)
    repo.git.remote("add", "origin", str(bare))
    repo.git.push("-q", "-u", "origin", "main")
    verdict(repo, "matmul-opt", BOB, "accept")
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        table = app.screen.query_one("QueueTable")
        table.cursor = next(i for i, r in enumerate(table.rows) if r.id == "relu-unwritten")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.row("relu-unwritten").reserved_by_me, what="the reservation")
        status = widget_text(app.screen.query_one("#queue-status"))
        assert "reserved relu-unwritten" in status and "sync:" in status
        assert git.Repo(bare).git.log("main", "--format=%s").count("kws reserve") == 1  # shared
        await pilot.press("home", "m")  # next task reserved by me
        assert table.current.id == "relu-unwritten"
        await pilot.press("u")
        await wait_for(pilot, lambda: not app.row("relu-unwritten").reserved_by, what="the release")
        # the release pushes too; its outcome comes after the row changes (later under load)
        await wait_for(pilot, lambda: app.last_outcome is not None and "released" in app.last_outcome.text,
                       what="the release's outcome")
        released = app.last_outcome
        await pilot.press("f6")
        await wait_for(pilot, lambda: app.last_outcome is not released and "sync:" in app.last_outcome.text,
                       what="the sync outcome")
        assert "up to date" in app.last_outcome.text
        await pilot.press("f7")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TextScreen", what="the calibration view")
        assert "Krippendorff" in widget_text(app.screen.query_one("#text-body"))
        await pilot.press("escape")
        table.cursor = next(i for i, r in enumerate(table.rows) if r.id == "matmul-opt")
        await pilot.press("f8")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TextScreen", what="the report view")
        assert "matmul-opt" in widget_text(app.screen.query_one("#text-body"))
        await pilot.press("end", "escape")
        assert type(app.screen).__name__ == "QueueScreen"


@run_async
async def test_resolve_a_dispute_from_the_review_screen(tmp_path, monkeypatch):
    from workstation.records.store import commit_dispute

    root = tui_env(monkeypatch, tmp_path)
    repo = git.Repo(root)
    v = verdict(repo, "matmul-opt", BOB, "accept")
    d = commit_dispute(repo, v, {"overall": "needs-work"}, "edge tiles untested", RUBRIC, identity=CAROL)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResolveScreen", what="the resolve dialog")
        assert d.dispute_id[:8] in widget_text(app.screen.query_one("#resolve-head"))
        await pilot.press("ctrl+s")  # nothing picked yet: refused with the reasons
        assert "pick an outcome" in widget_text(app.screen.query_one("#resolve-status"))
        await pilot.press("2", "enter")  # overturned; Enter from the last row goes to the rationale
        await pilot.press(*"Carol is right: K % 32 != 0 is never run", "ctrl+s")
        await wait_for(pilot, lambda: load_records(root).resolutions, what="the resolution")
        r = load_records(root).resolutions[0]
        assert r.dispute_id == d.dispute_id and r.outcome == "overturned" and r.fields == {"overall": "needs-work"}
        await wait_for(pilot, lambda: app.row("matmul-opt").open_disputes == 0, what="the queue flag")


@run_async
async def test_missing_identity_is_explained_in_full_and_noticed_once_set(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var)
    app = replay_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_queue(pilot)
        await wait_for(pilot, lambda: app.queue.identity_problem, what="the identity check")
        await pilot.pause(0.1)
        notice = widget_text(app.screen.query_one("#queue-notice"))
        assert "no git identity" in notice and "you@example.com" in notice  # the whole message, wrapped
        assert "GIT_AUTHOR_NAME" in notice
        git.Repo(root).git.config("user.name", "Dana Reviewer")
        git.Repo(root).git.config("user.email", "dana@example.com")
        app.refresh_identity()  # what the screen does every few seconds while it is missing
        await wait_for(pilot, lambda: app.queue.me is not None, what="the new identity")
        await pilot.pause(0.1)
        assert "Dana Reviewer" in widget_text(app.screen.query_one("#queue-title"))
        assert app.screen.query_one("#queue-notice").has_class("-empty")


@run_async
async def test_home_end_and_pages_move_between_rubric_fields_and_keys_jump_between_checks_and_fails(
        tmp_path, monkeypatch):
    """End then 1 sets the last field (Overall), Home then 1 the first; page down/up move
    by the fields on screen. In the checks list, c/C skip a check's findings and ./, go
    from fail to fail (a failed or errored check, or a fail finding), the bell at the end."""
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        await wait_review_ready(pilot)
        s = app.screen.session
        fields = [f for f in s.rubric.choice_fields]
        form = app.screen.query_one("RubricForm")
        await pilot.press("alt+5", "down", "end")
        assert form.cursor == len(fields) - 1
        await pilot.press("1")
        assert s.values.get(fields[-1].key) == fields[-1].values[0].value
        assert not any(s.values.get(f.key) for f in fields[:-1])
        await pilot.press("home", "1")
        assert s.values.get(fields[0].key) == fields[0].values[0].value and form.cursor == 1
        await pilot.press("pagedown")
        assert form.cursor > 2
        await pilot.press("pageup")
        assert form.cursor == 0

        await pilot.press("alt+3")
        lst = app.screen.query_one("ChecksList")
        assert app.focused is lst
        await pilot.press("home")
        checks = [i for i, e in enumerate(lst.entries) if e.finding is None]
        fails = [i for i, e in enumerate(lst.entries) if lst.is_fail(e)]
        assert len(checks) > 2 and len(fails) > 1, (checks, fails)
        for want in checks[1:3]:
            await pilot.press("c")
            assert lst.cursor == want
        await pilot.press("C")
        assert lst.cursor == checks[1]
        await pilot.press("home")
        if not lst.is_fail(lst.entries[0]):
            await pilot.press("full_stop")
            assert lst.cursor == fails[0]
        for want in fails[1:]:
            await pilot.press("full_stop")
            assert lst.cursor == want
        at = lst.cursor
        await pilot.press("full_stop")  # none below: stays, says so
        assert lst.cursor == at
        assert any("no fail or error below" in n.message for n in app._notifications)
        await pilot.press("comma")
        assert lst.cursor == fails[-2]
