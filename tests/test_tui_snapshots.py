"""Snapshot tests (pytest-textual-snapshot) of the queue and review screens at 160x48 and
80x24, on a fixed queue (tests/fixtures/tui_queue) with recorded check runs replayed.

Update after an intended change: ``pytest tests/test_tui_snapshots.py --snapshot-update``,
then look at the SVGs (snapshot_report.html shows the differences).
"""

from __future__ import annotations

import pytest

from tests.tuikit import replay_app, tui_env, wait_for, wait_queue, wait_review_ready

WIDE, NARROW = (160, 48), (80, 24)


@pytest.fixture
def app(tmp_path, monkeypatch):
    return replay_app(tui_env(monkeypatch, tmp_path))


async def _open(pilot, task: str) -> None:
    await wait_queue(pilot)
    pilot.app.screen.open_task(task)
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == task)
    await wait_review_ready(pilot)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["160x48", "80x24"])
def test_queue_screen(snap_compare, app, size):
    async def before(pilot):
        await wait_queue(pilot)
        await pilot.press("down", "down")

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["160x48", "80x24"])
def test_review_screen_with_a_finding_selected(snap_compare, app, size):
    async def before(pilot):
        await _open(pilot, "layernorm-debug")
        await pilot.press("down")  # the correctness fail finding: evidence + jump to candidate.py:51
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["160x48", "80x24"])
def test_review_screen_rubric_after_accepting_suggestions(snap_compare, app, size):
    async def before(pilot):
        await _open(pilot, "matmul-opt")
        await pilot.press("alt+5", "A", "3")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_review_screen_timing_panel(snap_compare, app):
    async def before(pilot):
        await _open(pilot, "bench-honest")
        await pilot.press("alt+4")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=WIDE, run_before=before)


def test_commit_confirmation_on_a_half_run_battery(snap_compare, tmp_path, monkeypatch):
    import threading

    app = replay_app(tui_env(monkeypatch, tmp_path), gate=threading.Event(), gate_before="edge-shapes")

    async def before(pilot):
        await wait_queue(pilot)
        pilot.app.screen.open_task("relu-unwritten")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "session", None) is not None)
        await wait_for(pilot, lambda: pilot.app.screen.files_ready, what="the spec and sources (a worker)")
        s = pilot.app.screen.session
        await wait_for(pilot, lambda: s.rows.get("reference-suspect") is not None and s.rows["reference-suspect"].done)
        await pilot.press("alt+5", "A")
        for f in s.rubric.choice_fields:
            if not s.values.get(f.key):
                pilot.app.screen.query_one("RubricForm").set_field(f.key, len(f.values))
        await pilot.press("e", *"see unwritten-output", "escape", "ctrl+s")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmScreen")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=WIDE, run_before=before)


def test_review_screen_spec_maximised(snap_compare, app):
    async def before(pilot):
        await _open(pilot, "matmul-opt")
        await pilot.press("alt+1", "z")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=WIDE, run_before=before)
