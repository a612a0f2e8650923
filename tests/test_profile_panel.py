"""The review screen's Profile panel (Pilot and snapshot), on a replayed run of the profile
checks of the sample task rmsnorm-ncu-profile (tests/fixtures/events_profile, recorded by
tests/fixtures/record_profile_events.py from a real engine run)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import SAMPLE_QUEUE
from tests.recordkit import ALICE, isolate, use_identity
from tests.tuikit import (
    EVENTS,
    FIXTURES,
    build_fixture_queue,
    run_async,
    wait_for,
    wait_queue,
    widget_text,
)
from workstation.repo.gitqueue import ensure_default_queue
from workstation.review.sources import ReplayCheckSource

TASK = "rmsnorm-ncu-profile"


def _streams() -> dict:
    out = {p.stem: json.loads(p.read_text()) for p in sorted(EVENTS.glob("*.json"))}
    for p in sorted((FIXTURES / "events_profile").glob("*.json")):
        out[p.stem] = json.loads(p.read_text())
    return out


@pytest.fixture
def app(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_identity(monkeypatch, ALICE)
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    src = build_fixture_queue(tmp_path / "fixture-src")
    shutil.copytree(SAMPLE_QUEUE / "tasks" / TASK, src / "tasks" / TASK, ignore=shutil.ignore_patterns("__pycache__"))
    root = ensure_default_queue(source=src, dest=tmp_path / "queue")
    from workstation.tui.app import KwsApp

    return KwsApp(root, check_source=ReplayCheckSource(_streams()))


async def _open_profile(pilot) -> None:
    await wait_queue(pilot)
    pilot.app.screen.open_task(TASK)
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "task_id", None) == TASK)
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "files_ready", False), what="the task files")
    await wait_for(pilot, lambda: pilot.app.screen.session.final_report is not None, what="the check run")
    await pilot.press("alt+7")
    await pilot.pause(0.2)


@run_async
async def test_alt_7_shows_the_profile_panel_in_the_timing_slot(app):
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_profile(pilot)
        screen = app.screen
        panel, timing = screen.query_one("#profile"), screen.query_one("#timing")
        assert panel.display and not panel.has_class("-hidden")
        assert timing.has_class("-hidden")  # the profile panel took the timing panel's slot
        table = panel.query_one("#profile-table")
        names = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert "_rmsnorm_rows" in names and "rms_norm_fwd_kernel" in names
        # sorted: within kws's candidate profile, kernels first, then host ops by time
        head = widget_text(panel.query_one("#profile-head"))
        assert "counts only" in head and "interpreter" in head
        bars = widget_text(panel.query_one("#profile-bars"))
        assert "█" in bars and "no time shares: the Triton interpreter" in bars
        assert "roofline rms_norm_fwd_kernel: 2835 GB/s (85% of peak)" in bars
        assert "WARN profile-attached" in bars
        await pilot.press("alt+4")  # back to the timing panel in the same slot
        await pilot.pause(0.1)
        assert not timing.has_class("-hidden") and panel.has_class("-hidden")


@run_async
async def test_profile_panel_is_a_tab_in_the_narrow_layout(app):
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_profile(pilot)
        tabs = widget_text(app.screen.query_one("#panel-tabs"))
        assert "[7 Profile]" in tabs
        assert app.screen.query_one("#profile").display
        assert app.screen.query_one("#checks").has_class("-hidden")


def test_profile_panel_snapshot(snap_compare, app):
    async def before(pilot):
        await _open_profile(pilot)

    assert snap_compare(app, terminal_size=(160, 48), run_before=before)
