"""The review app on a team's day (issue 41), under Pilot on replayed check runs: the
dispute and resolution dialogs check their rules when they open and keep drafts like the
verdict form; a draft written on another version of the task is marked; the checks
cursor follows the first fail and stays on screen; 80x24 shows the queue's headers, the
filter hint and every key hint; F5 and the rubric's status line never leave stale text."""

from __future__ import annotations

import git

from tests.recordkit import ALICE, BOB, CAROL, RUBRIC, verdict
from tests.tuikit import (
    replay_app,
    run_async,
    tui_env,
    wait_for,
    wait_queue,
    wait_review_ready,
    widget_text,
)
from workstation.records.drafts import load_form_draft
from workstation.records.parse import load_records
from workstation.records.store import commit_dispute


async def open_task(pilot, task: str) -> None:
    """Filter the queue down to ``task`` and open it, by keyboard."""
    await pilot.press("slash", *task, "enter")
    table = pilot.app.screen.query_one("QueueTable")
    await wait_for(pilot, lambda: table.current is not None and table.current.id == task, what=f"{task} selected")
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == task, what="the review screen")


def notes(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


@run_async
async def test_resolve_dialog_checks_self_resolution_when_it_opens_and_keeps_a_draft(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)  # the app runs as Alice
    repo = git.Repo(root)
    v = verdict(repo, "matmul-opt", ALICE, "accept")
    d = commit_dispute(repo, v, {"overall": "needs-work"}, "edge tiles untested", RUBRIC, identity=CAROL)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await pilot.press("X")  # Alice wrote the verdict: refused before any form is filled
        await wait_for(pilot, lambda: "you cannot resolve" in notes(app), what="the refusal")
        assert type(app.screen).__name__ == "ReviewScreen"
        assert "self_resolution = 'refuse'" in notes(app) and "alice@example.com" in notes(app)
        # as Bob, the dialog opens and says what each outcome does
        for var, val in (("GIT_AUTHOR_NAME", BOB.name), ("GIT_AUTHOR_EMAIL", BOB.email)):
            monkeypatch.setenv(var, val)
        app.refresh_identity()
        await wait_for(pilot, lambda: app.queue.me is not None and app.queue.me.email == BOB.email, what="Bob")
        await pilot.press("X")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResolveScreen", what="the resolve dialog")
        assert app.screen.query_one("Vertical").border_subtitle == f"commits to {root} as {BOB}"
        head = widget_text(app.screen.query_one("#resolve-head"))
        assert "1 upheld: the verdict stands" in head and "2 overturned: the dispute's values replace" in head
        assert "3 amended: your own values" in head
        await pilot.press("3", "3", "enter")  # amended, overall's 3rd value
        await pilot.press(*"half right")
        await pilot.press("escape")  # cancelled: the draft stays
        app.saver.flush()
        kept = load_form_draft(root, "resolution", d.dispute_id)
        assert kept is not None and kept.outcome == "amended" and kept.rationale == "half right"
        await pilot.press("X")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ResolveScreen", what="the dialog again")
        form = app.screen.query_one("ResolveFields")
        assert form.outcome == "amended" and form.values == kept.values
        assert app.screen.query_one("#resolve-rationale").text == "half right"
        assert "your draft of" in widget_text(app.screen.query_one("#resolve-status"))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: load_records(root).resolutions, what="the resolution")
        (r,) = load_records(root).resolutions
        assert r.outcome == "amended" and r.fields == kept.values and r.reviewer.email == BOB.email
        await wait_for(pilot, lambda: load_form_draft(root, "resolution", d.dispute_id) is None, what="draft gone")


@run_async
async def test_dispute_dialog_keeps_its_draft_and_refuses_without_identity(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    v = verdict(git.Repo(root), "matmul-opt", BOB, "accept")
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await pilot.press("D")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DisputeScreen", what="the dispute dialog")
        fields = app.screen.query_one("DisputeFields")
        await pilot.press("1", "tab", *"the reference is fp16")
        await pilot.press("escape")
        app.saver.flush()
        kept = load_form_draft(root, "dispute", v.verdict_id)
        assert kept is not None and kept.values == {"reference": fields.fields[0].values[0].value}
        await pilot.press("D")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DisputeScreen", what="the dialog again")
        assert app.screen.query_one("DisputeFields").values == kept.values
        assert app.screen.query_one("#dispute-rationale").text == "the reference is fp16"
        await pilot.press("escape")
        # no git identity: said when D is pressed, not after the form is filled
        for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
            monkeypatch.delenv(var)
        app.refresh_identity()
        await wait_for(pilot, lambda: app.queue.me is None, what="the identity to go")
        await pilot.press("D")
        await wait_for(pilot, lambda: "a dispute names who made it" in notes(app), what="the refusal")
        assert type(app.screen).__name__ == "ReviewScreen"


@run_async
async def test_checks_cursor_follows_the_first_fail_and_stays_on_screen(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "relu-unwritten")
        await wait_review_ready(pilot)
        lst = app.screen.query_one("ChecksList")
        e = lst.current
        assert e.check == "unwritten-output" and e.finding == 0  # the first fail finding, its evidence below
        evidence = widget_text(app.screen.query_one("#evidence-text"))
        assert "fail · unwritten-output" in evidence and "M=64 N=1024" in evidence
        assert app.screen.query_one("#evidence").size.height >= 6  # lines of evidence: readable without zooming
        top = int(lst.scroll_offset.y)
        assert top <= lst.cursor < top + lst.page_rows
        # moved by the reviewer, the cursor keeps its row when the rows are sorted again
        await pilot.press("G")
        last = lst.current
        lst.set_checks(list(app.screen.session.rows.values()))
        await pilot.pause(0.1)
        top = int(lst.scroll_offset.y)
        assert lst.current == last and top <= lst.cursor < top + lst.page_rows


@run_async
async def test_80x24_shows_the_headers_the_filter_hint_and_every_key_hint(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_queue(pilot)
        header = app.screen.query_one("QueueTable").render_line(0).text
        assert "…" not in header and "reserved" in header and "mine" in header, header
        flt = app.screen.query_one("#filter")
        assert len(flt.placeholder) <= 78
        hints = app.screen.query_one("KeyHints")
        await pilot.pause(0.1)
        text = widget_text(hints)
        assert "Keys" in text and "Reserve" in text and "…" not in text, text
        assert hints.size.height == 2
        await open_task(pilot, "relu-unwritten")
        await wait_review_ready(pilot)
        text = widget_text(app.screen.query_one("KeyHints"))
        assert "Commit" in text and "Keys" in text and "…" not in text, text


@run_async
async def test_draft_marker_shows_at_once_and_an_outdated_draft_is_marked(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await open_task(pilot, "matmul-opt")
        await wait_review_ready(pilot)
        await pilot.press("alt+5", "1")  # a value: the draft is saved
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.row("matmul-opt").has_draft, what="the draft flag")
        table = app.screen.query_one("QueueTable")
        i = next(i for i, r in enumerate(table.rows) if r.id == "matmul-opt")
        assert table.render_row(i, 120, False).text.startswith("✎")  # without a reload or a restart
        app.saver.flush()
    # the task changes in HEAD: the draft's values were entered on the old version
    repo = git.Repo(root)
    spec = root / "tasks" / "matmul-opt" / "spec.md"
    spec.write_text(spec.read_text() + "\nK is a multiple of 32.\n")
    repo.git.commit("-qam", "spec: K")
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await wait_for(pilot, lambda: app.row("matmul-opt").draft_outdated, what="the outdated flag")
        table = app.screen.query_one("QueueTable")
        i = next(i for i, r in enumerate(table.rows) if r.id == "matmul-opt")
        assert table.render_row(i, 120, False).text.startswith("≠")
        await open_task(pilot, "matmul-opt")
        await wait_for(pilot, lambda: "draft outdated" in widget_text(app.screen.query_one("#rubric-status")),
                       what="the outdated note")


@run_async
async def test_f5_and_the_rubric_status_leave_no_stale_line(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    app = replay_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_queue(pilot)
        await pilot.press("f5")
        status = app.screen.query_one("#queue-status")
        await wait_for(pilot, lambda: "reloading" not in widget_text(status), timeout=20, what="the reload")
        await open_task(pilot, "relu-unwritten")
        await wait_review_ready(pilot)
        rp = app.screen.query_one("RubricPanel")
        rp.set_status("not committed (cancelled)")
        await pilot.press("alt+5", "1")  # the reviewer changes a value: the line is stale now
        assert widget_text(app.screen.query_one("#rubric-status")).strip() == ""
