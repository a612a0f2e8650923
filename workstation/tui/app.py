"""The kws review app (Textual): a queue screen and a review screen per task.

The app only displays and dispatches. The queue index, records, identity, drafts and
commits (:mod:`workstation.review.services`), review state and suggestions
(:mod:`workstation.review.session`), diffs (:mod:`workstation.review.diff`) and the check
source (:mod:`workstation.review.sources`: the engine in a check server process) do the
work, always in worker threads: the UI thread never waits on git, the file system at
scale, or a check. Task code runs in the runner's niced child processes; this process
never imports torch or triton.

Screens learn of changes through two signals (``textual.signal.Signal``):
:attr:`KwsApp.queue_changed` (a new :class:`~workstation.review.services.QueueState`) and
:attr:`KwsApp.session_event` (a :class:`~workstation.tui.messages.SessionEvent`).

Entry point: :func:`run_app` (``kws`` without a sub-command).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from textual import events, work
from textual.app import App, SystemCommand
from textual.signal import Signal
from textual.widgets import Input, TextArea

from workstation.review import actions, services
from workstation.review.autosave import DraftSaver
from workstation.review.queueview import QueueRow
from workstation.review.services import QueueState
from workstation.review.session import ReviewSession
from workstation.review.sources import CheckSource, RunnerCheckSource, sandbox_marker
from workstation.schema.problem import Problem
from workstation.tui.keymap import KeymapLoad, bindings_for, resolve_keymap
from workstation.tui.messages import CheckEvent, QueueLoaded, SessionEvent
from workstation.tui.widgets.key_hints import KeyHints

__all__ = ["KwsApp", "run_app"]

#: what a terminal's alt+digit arrives as: terminals send Alt as an Esc prefix, and Textual's
#: xterm parser reads Esc+digit as the character macOS's Option+digit types (Esc 5 is "∞").
#: The app reads these keys as alt+digit (the panel keys) unless a text editor has focus.
ALT_DIGIT_KEYS = {
    "º": "0", "inverted_exclamation_mark": "1", "trade_mark_sign": "2",
    "pound_sign": "3", "cent_sign": "4", "infinity": "5", "section_sign": "6", "pilcrow_sign": "7",
    "bullet": "8", "ª": "9",
}


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

    Signals: ``queue_changed`` publishes the new :class:`QueueState` after each stage of
    (re)loading the queue; ``session_event`` publishes a :class:`SessionEvent` after each
    check event applied to a session.
    """

    CSS_PATH = Path(__file__).with_name("kws.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "kws"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {lambda: _kws_commands()}  # imported on the first ctrl+p
    ALLOW_IN_MAXIMIZED_VIEW = "KeyHints"

    #: Textual's own palette entries kws keeps, shown as "Textual: <title>" so they group
    #: apart from kws's actions; Quit, Keys and Maximize are dropped (kws's quit, help and
    #: maximise actions are the ones the keymap binds).
    TEXTUAL_COMMANDS = ("Theme", "Screenshot")

    def get_system_commands(self, screen: Any) -> Any:
        for c in super().get_system_commands(screen):
            if c.title in self.TEXTUAL_COMMANDS:
                yield SystemCommand(f"Textual: {c.title}", c.help, c.callback, c.discover)

    def __init__(self, queue: Path | str, *, keymap: str | KeymapLoad | None = None,
                 check_source: CheckSource | None = None, highlight: bool = True,
                 warm_runner: bool = True) -> None:
        super().__init__()
        self.queue_changed: Signal[QueueState] = Signal(self, "queue-changed")
        self.session_event: Signal[SessionEvent] = Signal(self, "session-event")
        self.animation_level = "none"  # over SSH every animation frame costs bandwidth
        self.queue = QueueState(root=Path(queue).expanduser().resolve())
        self.keymap_load = keymap if isinstance(keymap, KeymapLoad) else resolve_keymap(keymap)
        self.check_source: CheckSource = check_source or RunnerCheckSource()
        self.highlight = highlight
        #: shown on every screen when task code runs without the sandbox ("" otherwise).
        self.sandbox_marker = sandbox_marker()
        self.warm_runner = warm_runner and check_source is None
        self.sessions: dict[str, ReviewSession] = {}
        #: set once the queue screen has painted the rows of a loading stage
        self.first_rows_shown = threading.Event()
        self._preloaded = False
        self.last_outcome: actions.ActionOutcome | None = None
        self._runs: dict[str, int] = {}
        self._run_counter = 0
        self.saver = DraftSaver(on_error=lambda e: self.call_from_thread(
            self.notify, f"draft not saved: {e}", severity="error", timeout=10))

    # -- lifecycle ---------------------------------------------------------------------------

    def on_mount(self) -> None:
        from workstation.tui.screens.queue import QueueScreen

        self.set_keymap(self.keymap_load.keys)
        self.push_screen(QueueScreen())
        self.show_keymap_problems(self.keymap_load)
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
        order itself; its ``EARLY_KEYS``, such as Escape, are resolved here too): a
        widget's synchronous key handler (``handle_key_now``: the rubric's value keys) or
        the key's active binding runs right here, and the next key already goes where the
        reviewer is typing. A key this does not resolve takes Textual's usual route. Alt+digit
        arrives from a terminal as a character (:data:`ALT_DIGIT_KEYS`) and is read as
        alt+digit here."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            focused = self.focused
            maximized_escape = (self.screen.maximized is not None and event.key == "escape"
                                and self.escape_to_minimize)
            editor = isinstance(focused, Input | TextArea) and event.key not in getattr(focused, "EARLY_KEYS", ())
            if not maximized_escape and not editor:
                key = f"alt+{ALT_DIGIT_KEYS[event.key]}" if event.key in ALT_DIGIT_KEYS else event.key
                if await self._run_active_binding(key, priority=True):
                    return
                now = getattr(focused, "handle_key_now", None)
                if now is not None and now(event):
                    return
                consumed = focused is not None and focused.check_consume_key(event.key, event.character)
                if not consumed and await self._run_active_binding(key, priority=False):
                    return
        await super().on_event(event)

    async def _run_active_binding(self, key: str, *, priority: bool) -> bool:
        """Run the screen's active binding of ``key`` (``Screen.active_bindings``: the one
        nearest the focused widget, a priority binding first, the keymap applied) when its
        priority is ``priority`` and it is enabled; True when its action ran
        (``App.run_action`` in the binding's namespace)."""
        active = self.screen.active_bindings.get(key)
        if active is None or active.binding.priority != priority or not active.enabled:
            return False
        return await self.run_action(active.binding.action, active.node)

    # -- keymaps -------------------------------------------------------------------------------

    def apply_keymap(self, choice: str) -> None:
        """Switch to keymap ``choice`` (default, vim or a file), user overrides on top."""
        load = resolve_keymap(choice)
        self.keymap_load = load
        self.set_keymap(load.keys)
        self.notify(f"keymap: {load.name}", timeout=3)
        self.show_keymap_problems(load)
        self.screen.refresh_bindings()
        for hints in self.screen.query(KeyHints):
            hints.update_hints()

    def show_keymap_problems(self, load: KeymapLoad) -> None:
        """Every problem of the keymap files (file, key, problem), in a view that stays
        until the reviewer closes it (Esc): each bad entry was ignored on its own, the
        rest of the keymap is in use. ``kws doctor`` lists the same problems."""
        from workstation.tui.screens.text_view import TextScreen

        if not load.problems:
            return
        lines = [f"{len(load.problems)} problem(s) in the keymap files; each entry named here is ignored, "
                 f"every other binding is in use (keymap: {load.name}).", ""]
        for file in dict.fromkeys(str(p.file) for p in load.problems):
            lines.append(file)
            lines += [f"  {p.key or '(the whole file)'}: {p.problem}" for p in load.problems if str(p.file) == file]
        lines += ["", "Fix the file and restart kws (or f2 switches keymap); docs/tui.md, \"Keymap files\"."]
        self.push_screen(TextScreen("Keymap problems", "\n".join(lines), hint="kws doctor lists these too"))

    def action_switch_keymap(self) -> None:
        self.apply_keymap("vim" if self.keymap_load.name == "default" else "default")

    def action_show_keys(self) -> None:
        from workstation.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- the queue -----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="queue-load")
    def load_queue(self, validate: bool = True) -> None:
        """Index the queue (a worker), in stages, each posted as soon as it is ready
        (:func:`workstation.review.services.load_queue`): the task rows, then the review
        flags, then the validation of tasks the index cache did not vouch for; then warm
        the check runner up."""
        try:
            for state in services.load_queue(self.queue.root, validate=validate):
                self.first_rows_shown.clear()
                self.post_message(QueueLoaded(state))
                if not state.flags_loaded:
                    # the rows' first frame before the rubric, git and the records (they
                    # would compete with it for the GIL); at most a second
                    self.first_rows_shown.wait(1.0)
        except Problem as e:
            self.call_from_thread(self.notify, str(e), severity="error", timeout=30)
            return
        if self.warm_runner and isinstance(self.check_source, RunnerCheckSource):
            self.warm_runner = False
            try:
                self.check_source.warm_up()
            except Exception:  # noqa: BLE001  (reported when a check run is attempted)
                pass

    def on_queue_loaded(self, msg: QueueLoaded) -> None:
        self.queue = msg.state
        self.queue_changed.publish(msg.state)
        if msg.state.flags_loaded and not self._preloaded:
            self._preloaded = True
            self._preload()

    @work(thread=True, exclusive=True, group="preload")
    def _preload(self) -> None:
        """While the reviewer reads the queue: import what opening a task needs (the review
        screen and its widgets, Markdown, the diff model), so the first task opens without
        paying for imports. Imports only: nothing runs, nothing is read."""
        import importlib

        for name in ("workstation.tui.screens.review", "workstation.tui.screens.confirm", "rich.markdown",
                     "workstation.review.diff", "workstation.tui.commands"):
            importlib.import_module(name)

    @work(thread=True, exclusive=True, group="records")
    def reload_records(self) -> None:
        """Re-read records (after a commit or dispute) and rebuild the rows."""
        self.post_message(QueueLoaded(services.reload_records(self.queue)))

    @work(thread=True, exclusive=True, group="identity")
    def refresh_identity(self) -> None:
        """Look the reviewer's git identity up again; when it changed (set in another
        terminal), reload the records so the rows and the title show it."""
        me, problem = services.identity(self.queue.root)
        if (me, problem) != (self.queue.me, self.queue.identity_problem):
            self.post_message(QueueLoaded(services.reload_records(self.queue)))

    def on_app_focus(self) -> None:
        if self.queue.loaded and self.queue.me is None:
            self.refresh_identity()

    def row(self, task_id: str) -> QueueRow | None:
        return next((r for r in self.queue.rows if r.id == task_id), None)

    # -- review sessions and check runs -----------------------------------------------------

    def session_for(self, task_id: str) -> ReviewSession:
        """The review session of ``task_id`` (kept while the app runs, so leaving a task
        and coming back keeps its checks), created with its saved draft.

        Raises:
            RuntimeError: the session is new and the queue's rubric is not loaded (the
                queue screen opens no task before it is).
        """
        s = self.sessions.get(task_id)
        if s is None:
            rubric = self.queue.rubric
            if rubric is None:  # the queue screen opens a task only with the rubric loaded
                raise RuntimeError(f"no review session for {task_id}: the queue's rubric is not loaded")
            draft = services.load_draft(self.queue.root, task_id)
            s = ReviewSession(task_id, self.queue.root, rubric, draft=draft, on_change=self._autosave)
            self.sessions[task_id] = s
        return s

    def _autosave(self, session: ReviewSession) -> None:
        """Save the session's draft (in the saver's thread) once the reviewer changed
        something: opening a task and watching its checks writes no draft."""
        if not session.touched:
            return
        self.saver.submit(session.draft())
        if session.task_id not in self.queue.drafts or not self._row_has_draft(session.task_id):
            # the queue's ✎ shows at once, not after a reload or a restart
            from dataclasses import replace

            self.queue.drafts.add(session.task_id)
            self.queue.outdated_drafts.discard(session.task_id)
            self.queue.rows = [replace(r, has_draft=True, draft_outdated=False) if r.id == session.task_id else r
                               for r in self.queue.rows]
            self.queue_changed.publish(self.queue)

    def _row_has_draft(self, task_id: str) -> bool:
        row = self.row(task_id)
        return row is None or row.has_draft

    def run_checks(self, session: ReviewSession, only: list[str] | None = None) -> None:
        """Start a check run for ``session`` in a worker thread; events stream in as
        :class:`CheckEvent` messages."""
        self._run_counter += 1
        run = self._run_counter
        if not only:
            self._runs[session.task_id] = run
        session.begin_run(only)
        self._check_worker(session, run, services.task_dir(self.queue.root, session.task_id), only)

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
        self.session_event.publish(SessionEvent(s, msg.kind, cid))


    # -- reviewer actions on any screen --------------------------------------------------------

    def current_task(self) -> str | None:
        """The task the reviewer is on: the open one, else the one under the queue cursor."""
        for scr in reversed(self.screen_stack):
            tid = getattr(scr, "task_id", None)
            if tid:
                return tid
            table = getattr(scr, "table", None)
            cur = getattr(table, "current", None) if table is not None else None
            if cur is not None:
                return cur.id
        return None

    def _queue_screen(self) -> Any:
        from workstation.tui.screens.queue import QueueScreen

        return next((s for s in self.screen_stack if isinstance(s, QueueScreen)), None)

    def open_task(self, task_id: str) -> None:
        """Open ``task_id`` from any screen (leaving the review screen and dialogs)."""
        qs = self._queue_screen()
        if qs is None:
            return
        while self.screen is not qs and len(self.screen_stack) > 2:
            self.pop_screen()
        qs.open_task(task_id)

    def open_next_task(self, which: str = "unreviewed", after: str | None = None,
                       exclude: tuple[str, ...] = ()) -> None:
        """Open the next task I have not reviewed (``which="unreviewed"``: nobody else
        holds it) or hold reserved (``"reserved"``), after ``after`` in the queue screen's
        order; tells the reviewer when there is none.

        The queue screen's filter narrows the walk first; when the filtered view has no
        such task left but the whole queue has, the filter is cleared (the reviewer is
        told which filter) and the walk goes on in the whole queue, in the same sort
        order: a search for one task never dead-ends commit-and-next."""
        from workstation.review.queueview import next_task, sort_rows

        qs = self._queue_screen()
        rows = qs.shown if qs is not None else self.queue.rows
        nxt = next_task(rows, after, which, exclude)
        cleared = ""
        if nxt is None and qs is not None and qs.filter_text.strip():
            nxt = next_task(sort_rows(list(self.queue.rows), qs.sort_key, qs.sort_reverse), after, which, exclude)
            if nxt is not None:
                cleared = qs.filter_text.strip()
                qs.clear_filter_now()
        if nxt is None:
            what = "unreviewed task" if which == "unreviewed" else "task reserved by you and not reviewed"
            self.notify(f"no {what} left in the queue", timeout=6)
            return
        if cleared:
            self.notify(f"no task left in the filter '{cleared}': cleared it, on to {nxt.id}", timeout=6)
        self.open_task(nxt.id)

    def action_sync(self) -> None:
        self.notify("syncing the queue's records…", timeout=2)
        self._record_action(actions.sync_queue, self.queue.root)

    def reserve(self, task_id: str) -> None:
        self._record_action(actions.reserve_task, self.queue.root, task_id)

    def release(self, task_id: str) -> None:
        self._record_action(actions.release_task, self.queue.root, task_id)

    @work(thread=True, group="records-action")
    def _record_action(self, fn: Any, *args: Any) -> None:
        """Run a record service (sync, reserve, release) in a worker; show its outcome
        (notification and the queue's status line) and reload the records."""
        out = fn(*args)
        self.call_from_thread(self.show_outcome, out)
        self.post_message(QueueLoaded(services.reload_records(self.queue)))

    def show_outcome(self, out: actions.ActionOutcome) -> None:
        if out.error:
            self.notify((out.text + "\n" if out.text else "") + out.error, severity="error", timeout=12)
        else:
            self.notify(out.text, timeout=6)
        self.last_outcome = out
        qs = self._queue_screen()
        if qs is not None:
            qs.show_outcome(out)

    def action_show_calibration(self) -> None:
        self._calibration_worker()

    @work(thread=True, exclusive=True, group="views")
    def _calibration_worker(self) -> None:
        text = actions.calibration(self.queue.root, self.queue.rubric)
        self.call_from_thread(self._show_text, "Calibration: agreement with gold verdicts", text, False,
                              "kws calibrate prints the same")

    def action_show_report(self) -> None:
        task = self.current_task()
        if task is None:
            self.notify("no task: open one or put the cursor on it", timeout=3)
            return
        self._report_worker(task)

    @work(thread=True, exclusive=True, group="views")
    def _report_worker(self, task: str) -> None:
        out = actions.task_report(self.queue.root, task)
        if out.error:
            self.call_from_thread(self.notify, out.error, severity="warning", timeout=6)
            return
        self.call_from_thread(self._show_text, f"Report: {task}", out.text, True,
                              f"kws report {task} -o FILE writes it")

    def _show_text(self, title: str, text: str, markdown: bool, hint: str) -> None:
        from workstation.tui.screens.text_view import TextScreen

        self.push_screen(TextScreen(title, text, markdown=markdown, hint=hint))

    def resolve_disputes(self, task_id: str, after: Any = None) -> None:
        """Open the resolution dialog on ``task_id``'s open disputes (loaded in a worker)."""
        self._disputes_worker(task_id, after)

    @work(thread=True, exclusive=True, group="views")
    def _disputes_worker(self, task_id: str, after: Any) -> None:
        disputes = actions.open_disputes(self.queue.root, task_id)
        self.call_from_thread(self._resolve_dialog, task_id, disputes, after)

    def _resolve_dialog(self, task_id: str, disputes: Any, after: Any) -> None:
        from workstation.tui.screens.resolve import ResolveScreen

        if not disputes:
            self.notify(f"{task_id} has no open dispute", timeout=4)
            return
        # the rules are checked here, when the dialog would open, not after the form is filled
        mine = [d for d in disputes if not d.refusal]
        if not mine:
            self.notify(f"you cannot resolve the open dispute(s) of {task_id}: {disputes[0].refusal}",
                        severity="warning", timeout=12)
            return
        if len(mine) < len(disputes):
            self.notify(f"{len(disputes) - len(mine)} open dispute(s) of {task_id} are not in the dialog: "
                        f"{next(d.refusal for d in disputes if d.refusal)}", timeout=8)

        def done(result: Any) -> None:
            if result:
                d, outcome, fields, rationale = result
                self._resolve_worker(d.dispute_id, outcome, rationale, fields, after)

        self.push_screen(ResolveScreen(task_id, mine, self.queue.rubric), done)

    @work(thread=True, exclusive=True, group="commit")
    def _resolve_worker(self, dispute_id: str, outcome: str, rationale: str, fields: dict[str, str],
                        after: Any) -> None:
        out = actions.resolve_dispute(self.queue.root, dispute_id, outcome, rationale, fields)
        self.call_from_thread(self.show_outcome, out)
        self.post_message(QueueLoaded(services.reload_records(self.queue)))
        if after is not None and not out.error:
            self.call_from_thread(after)


def _kws_commands() -> type:
    """The palette's provider (:mod:`workstation.tui.commands`), imported on first use."""
    from workstation.tui.commands import KwsCommands

    return KwsCommands


def run_app(queue: Path | None, keymap: str | None) -> None:
    """Open the review app on ``queue`` (default: the per-user sample queue, created on
    first run) with ``keymap`` (default, vim, or a keymap file)."""
    try:
        root = services.open_queue_root(queue)
    except services.ServiceError as e:
        print(f"kws: {e}", file=sys.stderr)
        sys.exit(2)
    if keymap is not None and keymap not in ("default", "vim") and not Path(keymap).is_file():
        print(f"kws: --keymap {keymap!r}: not a bundled keymap (default, vim) or a file", file=sys.stderr)
        sys.exit(2)
    KwsApp(root, keymap=keymap).run()
