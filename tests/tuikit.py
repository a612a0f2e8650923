"""Helpers for the TUI tests: an isolated environment, a git copy of the fixture queue, an
app that replays recorded check runs, and waiting on app state."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import SAMPLE_QUEUE
from tests.recordkit import ALICE, isolate, use_identity
from workstation.repo.gitqueue import ensure_default_queue
from workstation.review.sources import ReplayCheckSource

FIXTURES = Path(__file__).parent / "fixtures"
EVENTS = FIXTURES / "events"
#: sample tasks the TUI fixture queue takes from sample_queue/ (the recorded event streams
#: in tests/fixtures/events are runs of these); tests/fixtures/tui_queue adds queue.toml and
#: a malformed task.
FIXTURE_TASKS = ("bench-honest", "gemm-cuda2triton", "layernorm-debug", "matmul-opt", "relu-unwritten")


def build_fixture_queue(dest: Path) -> Path:
    """Assemble the TUI test queue at ``dest`` (a plain folder, not yet a git repo):
    ``tests/fixtures/tui_queue`` plus :data:`FIXTURE_TASKS` copied from ``sample_queue/``."""
    shutil.copytree(FIXTURES / "tui_queue", dest)
    for task in FIXTURE_TASKS:
        shutil.copytree(SAMPLE_QUEUE / "tasks" / task, dest / "tasks" / task,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def tui_env(monkeypatch, tmp_path: Path) -> Path:
    """Isolate git and kws folders in ``tmp_path``, identity Alice (env vars only), and
    return a git copy of ``tests/fixtures/tui_queue`` at ``tmp_path/queue``."""
    isolate(monkeypatch, tmp_path)
    use_identity(monkeypatch, ALICE)
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    return ensure_default_queue(source=build_fixture_queue(tmp_path / "fixture-src"), dest=tmp_path / "queue")


def replay_app(root: Path, keymap: str | None = None, **kw):
    """A :class:`KwsApp` on ``root`` whose checks replay the recorded runs."""
    from workstation.tui.app import KwsApp

    return KwsApp(root, keymap=keymap, check_source=ReplayCheckSource(EVENTS, **kw))


async def wait_for(pilot, cond: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    """Let the app run until ``cond()`` holds (AssertionError after ``timeout`` s)."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await pilot.pause(0.05)


async def wait_queue(pilot, validated: bool = True) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.queue.loaded and app.queue.flags_loaded and (not validated or not app.queue.validating),
                   what="the queue to load")
    await pilot.pause(0.05)


async def wait_review_ready(pilot) -> None:
    """Wait until the review screen has its files, highlighting, history and a finished run."""
    app = pilot.app
    await wait_for(pilot, lambda: getattr(app.screen, "files_ready", False), what="the task files")
    await wait_for(pilot, lambda: app.screen.session.final_report is not None, what="the check run")
    diff = app.screen.query_one("DiffPanel")
    await wait_for(pilot, lambda: len(diff.tokens) == len(diff.files), what="syntax highlighting")
    await wait_for(pilot, lambda: app.screen.query_one("SpecPanel").history_text,
                   what="the history")
    await pilot.pause(0.1)


def run_async(fn):
    """Run an ``async def`` test with :func:`asyncio.run` (no pytest async plugin needed)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def widget_text(widget) -> str:
    """The text a widget shows (all its lines, as rendered at its current width)."""
    from textual.geometry import Region

    h = max(widget.size.height, widget.virtual_size.height)
    return "\n".join(s.text.rstrip() for s in widget.render_lines(Region(0, 0, widget.size.width, h)))


def burst(app, keys) -> None:
    """Queue key events all at once, as they arrive when an SSH packet carries several
    keystrokes (Pilot.press waits for the app between keys; this does not)."""
    from textual import events

    for k in keys:
        ev = events.Key(k, k if len(k) == 1 else None)
        ev.set_sender(app)
        app._driver.send_message(ev)
