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
        await pilot.press("5", "A", "l")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_review_screen_timing_panel(snap_compare, app):
    async def before(pilot):
        await _open(pilot, "bench-honest")
        await pilot.press("4")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=WIDE, run_before=before)
