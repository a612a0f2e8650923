"""The kws review app (Textual): a queue screen and a review screen per task.

The app only displays and dispatches. Queue indexing (:mod:`workstation.review.queueview`),
review state, suggestions and drafts (:mod:`workstation.review.session`), diffs
(:mod:`workstation.review.diff`), records (:mod:`workstation.records.store`) and the check
engine do the work, always in worker threads: the UI thread never waits on git, the
file system at scale, or a check. Task code runs in the runner's niced child processes;
this process never imports torch or triton.

Entry point: :func:`run_app` (``kws`` without a sub-command).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual import events, work
from textual.app import App
from textual.message import Message
from textual.widgets import Input, TextArea

from workstation.review.autosave import DraftSaver
from workstation.review.queueview import (
    QueueIndex,
    QueueRow,
    build_rows,
    scan_queue,
    validate_index,
)
from workstation.review.session import ReviewSession
from workstation.review.sources import CheckSource, RunnerCheckSource
from workstation.tui.commands import KwsCommands
from workstation.tui.keymap import KeymapLoad, bindings_for, resolve_keymap

__all__ = ["KwsApp", "QueueState", "run_app"]


@dataclass
class QueueState:
    """What the app knows about the open queue (filled by workers)."""

    root: Path
    index: QueueIndex | None = None
    rows: list[QueueRow] = field(default_factory=list)
    records: Any = None
    me: Any = None
    identity_problem: str = ""
    rubric: Any = None
    rubric_problem: str = ""
    drafts: set[str] = field(default_factory=set)
    validating: bool = False
    loaded: bool = False


class QueueLoaded(Message):
    """A worker finished (re)loading the queue index, records and identity."""

    def __init__(self, state: QueueState, validated: bool) -> None:
        super().__init__()
        self.state = state
        self.validated = validated


class CheckEvent(Message):
    """One normalised engine event for ``session`` (posted from a worker thread)."""

    def __init__(self, session: ReviewSession, run: int, kind: str, data: dict[str, Any]) -> None:
        super().__init__()
        self.session = session
        self.run = run
        self.kind = kind
        self.data = data


class KwsApp(App):
    """The review app on the queue at ``queue``.

    Args:
        queue: the queue's root folder (a git repository with ``tasks/``).
        keymap: ``"default"``, ``"vim"``, a keymap file, or an already resolved
            :class:`~workstation.tui.keymap.KeymapLoad`.
        check_source: what runs checks (default: the real engine in an isolated fork
            server, :class:`~workstation.review.sources.RunnerCheckSource`); tests inject a
            :class:`~workstation.review.sources.ReplayCheckSource`.
        highlight: syntax-highlight sources (off in snapshot tests is not needed: the
            highlighting is deterministic).
        warm_runner: start the fork server in the background once the queue shows.
    """

    CSS_PATH = Path(__file__).with_name("kws.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "kws"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {KwsCommands}
    ALLOW_IN_MAXIMIZED_VIEW = "Footer"

    def __init__(self, queue: Path | str, *, keymap: str | KeymapLoad | None = None,
                 check_source: CheckSource | None = None, highlight: bool = True,
                 warm_runner: bool = True) -> None:
        super().__init__()
        self.animation_level = "none"  # over SSH every animation frame costs bandwidth
        self.queue = QueueState(root=Path(queue).expanduser().resolve())
        self.keymap_load = keymap if isinstance(keymap, KeymapLoad) else resolve_keymap(keymap)
        self.check_source: CheckSource = check_source or RunnerCheckSource()
        self.highlight = highlight
        self.warm_runner = warm_runner and check_source is None
        self.sessions: dict[str, ReviewSession] = {}
        self._runs: dict[str, int] = {}
        self._run_counter = 0
        self.saver = DraftSaver(on_error=lambda e: self.call_from_thread(
            self.notify, f"draft not saved: {e}", severity="error", timeout=10))

    # -- lifecycle ---------------------------------------------------------------------------

    def on_mount(self) -> None:
        from workstation.tui.queue_screen import QueueScreen

        self.set_keymap(self.keymap_load.keys)
        for p in self.keymap_load.problems:
            self.notify(f"keymap ignored, using the default: {p}", severity="error", timeout=20)
        self.push_screen(QueueScreen())
        self.load_queue()

    def on_unmount(self) -> None:
        self.saver.close()
        self.check_source.close()

    # -- keys typed in a burst ---------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        """Resolve a key when the app reads it, before routing it to a widget.

        Textual routes a key to the widget focused when the app reads it and runs the
        (non-priority) bindings only after the key has bubbled back up from there. Over
        SSH keys often arrive in bursts ("/" and "relu" in one packet, "5" and "l", "e" and
        a sentence): the keys after one whose binding moves focus would go to the widget
        that had focus before. So, unless a text editor has focus (it takes the keys in
        order itself; its ``EARLY_KEYS``, such as Escape, are resolved here too): a widget's synchronous key handler (``handle_key_now``: the rubric's
        value keys) or the key's bindings run right here, and the next key already goes
        where the reviewer is typing."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            focused = self.focused
            maximized_escape = (self.screen.maximized is not None and event.key == "escape"
                                and self.escape_to_minimize)
            editor = isinstance(focused, Input | TextArea) and event.key not in getattr(focused, "EARLY_KEYS", ())
            if not maximized_escape and not editor:
                if await self._check_bindings(event.key, priority=True):
                    return
                now = getattr(focused, "handle_key_now", None)
                if now is not None and now(event):
                    return
                consumed = focused is not None and focused.check_consume_key(event.key, event.character)
                if not consumed and await self._check_bindings(event.key):
                    return
        await super().on_event(event)

    # -- keymaps -------------------------------------------------------------------------------

    def apply_keymap(self, choice: str) -> None:
        """Switch to keymap ``choice`` (default, vim or a file), user overrides on top."""
        load = resolve_keymap(choice)
        self.keymap_load = load
        self.set_keymap(load.keys)
        for p in load.problems:
            self.notify(f"keymap ignored, using the default: {p}", severity="error", timeout=20)
        self.notify(f"keymap: {load.name}", timeout=3)
        self.screen.refresh_bindings()

    def action_switch_keymap(self) -> None:
        self.apply_keymap("vim" if self.keymap_load.name == "default" else "default")

    def action_show_keys(self) -> None:
        from workstation.tui.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- the queue -----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="queue-load")
    def load_queue(self, validate: bool = True) -> None:
        """Index the queue (a worker), in stages, each posted as soon as it is ready:
        the task rows (file reads only), then the review flags (git identity, records),
        then the validation of tasks the index cache did not vouch for."""
        from workstation.records.drafts import draft_path
        from workstation.rubric.model import queue_rubric
        from workstation.schema.problem import Problem

        st = QueueState(root=self.queue.root)
        try:
            st.index = scan_queue(st.root)
        except Problem as e:
            self.call_from_thread(self.notify, str(e), severity="error", timeout=30)
            return
        try:
            st.rubric = queue_rubric(st.root)
        except Problem as e:
            st.rubric_problem = str(e)
        folder = draft_path(st.root, "x").parent
        st.drafts = {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()
        st.rows = build_rows(st.index, None, None, st.drafts)
        st.loaded = True
        st.validating = validate and bool(st.index.pending)
        self.post_message(QueueLoaded(st, validated=not st.validating))

        from workstation.records.store import load_records
        from workstation.repo.gitqueue import QueueError, open_queue, reviewer_identity

        st = QueueState(**{**st.__dict__})
        try:
            repo = open_queue(st.root)
            try:
                st.me = reviewer_identity(repo)
            except QueueError as e:
                st.identity_problem = str(e)
            repo.close()
        except QueueError as e:
            st.identity_problem = str(e)
        st.records = load_records(st.root)
        st.rows = build_rows(st.index, st.records, st.me, st.drafts)
        self.post_message(QueueLoaded(st, validated=not st.validating))
        if st.validating:
            ix = st.index
            ix = QueueIndex(ix.root, ix.name, ix.rubric_id, dict(ix.tasks), dict(ix.errors), dict(ix.signatures))
            validate_index(ix)  # on a copy: the UI thread reads the posted one
            st = QueueState(**{**st.__dict__})
            st.index = ix
            st.rows = build_rows(st.index, st.records, st.me, st.drafts)
            st.validating = False
            self.post_message(QueueLoaded(st, validated=True))
        if self.warm_runner and isinstance(self.check_source, RunnerCheckSource):
            self.warm_runner = False
            try:
                self.check_source.warm_up()
            except Exception:  # noqa: BLE001  (reported when a check run is attempted)
                pass

    def on_queue_loaded(self, msg: QueueLoaded) -> None:
        self.queue = msg.state
        for screen in self.screen_stack:
            hook = getattr(screen, "queue_changed", None)
            if hook is not None and screen.is_attached:
                hook()

    @work(thread=True, exclusive=True, group="records")
    def reload_records(self) -> None:
        """Re-read records (after a commit or dispute) and rebuild the rows."""
        from workstation.records.store import load_records

        st = QueueState(**{**self.queue.__dict__})
        st.records = load_records(st.root)
        if st.index is not None:
            st.rows = build_rows(st.index, st.records, st.me, st.drafts)
        self.post_message(QueueLoaded(st, validated=not st.validating))

    def row(self, task_id: str) -> QueueRow | None:
        return next((r for r in self.queue.rows if r.id == task_id), None)

    # -- review sessions and check runs -----------------------------------------------------

    def session_for(self, task_id: str) -> ReviewSession:
        """The review session of ``task_id`` (kept while the app runs, so leaving a task
        and coming back keeps its checks), created with its saved draft."""
        s = self.sessions.get(task_id)
        if s is None:
            from workstation.records.drafts import load_draft

            draft = load_draft(self.queue.root, task_id)
            s = ReviewSession(task_id, self.queue.root, self.queue.rubric, draft=draft,
                              on_change=self._autosave)
            self.sessions[task_id] = s
        return s

    def _autosave(self, session: ReviewSession) -> None:
        self.saver.submit(session.draft())
        self.queue.drafts.add(session.task_id)

    def run_checks(self, session: ReviewSession, only: list[str] | None = None) -> None:
        """Start a check run for ``session`` in a worker thread; events stream in as
        :class:`CheckEvent` messages."""
        self._run_counter += 1
        run = self._run_counter
        if not only:
            self._runs[session.task_id] = run
        session.begin_run(only)
        task_dir = self.queue.root / "tasks" / session.task_id
        self._check_worker(session, run, task_dir, only)

    @work(thread=True, group="checks")
    def _check_worker(self, session: ReviewSession, run: int, task_dir: Path, only: list[str] | None) -> None:
        def emit(kind: str, data: dict[str, Any]) -> None:
            self.post_message(CheckEvent(session, run, kind, data))

        self.check_source.run(task_dir, only, emit)

    def on_check_event(self, msg: CheckEvent) -> None:
        s = msg.session
        full = self._runs.get(s.task_id)
        if full is not None and msg.run < full and msg.kind in ("start", "done"):
            return  # a superseded full run
        cid = s.apply_event(msg.kind, msg.data)
        if msg.kind in ("check_finished", "done"):
            self._autosave(s)
        if not self.screen_stack:
            return  # the app is closing
        screen = self.screen
        hook = getattr(screen, "session_event", None)
        if hook is not None and getattr(screen, "session", None) is s:
            hook(msg.kind, cid)


def run_app(queue: Path | None, keymap: str | None) -> None:
    """Open the review app on ``queue`` (default: the per-user sample queue, created on
    first run) with ``keymap`` (default, vim, or a keymap file)."""
    from workstation.repo.gitqueue import QueueError, ensure_default_queue

    try:
        root = Path(queue) if queue is not None else ensure_default_queue()
    except QueueError as e:
        print(f"kws: {e}", file=sys.stderr)
        sys.exit(2)
    if not (root / "tasks").is_dir():
        print(f"kws: {root}: not a kws queue (no tasks/ folder)", file=sys.stderr)
        sys.exit(2)
    if keymap is not None and keymap not in ("default", "vim") and not Path(keymap).is_file():
        print(f"kws: --keymap {keymap!r}: not a bundled keymap (default, vim) or a file", file=sys.stderr)
        sys.exit(2)
    KwsApp(root, keymap=keymap).run()
