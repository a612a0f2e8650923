"""The review screen: spec, source diff, checks, timing and rubric of one task.

It displays the app's :class:`~workstation.review.session.ReviewSession` of the task and
dispatches keys to it; git and record work (task version, history, commits) goes through
:mod:`workstation.review.services` in worker threads. It learns of check events and queue
changes from the app's ``session_event`` and ``queue_changed`` signals.

Layout: on a terminal at least :data:`WIDE_MIN` columns wide and :data:`TALL_MIN` rows
high the panels sit side by side (spec over diff on the left; checks, timing and rubric
on the right; the profile panel takes the timing panel's place when shown); below that they become tabs, one panel at a time, with every control of
the shown panel on screen. Any panel can be maximised (it then fills the screen) and
restored with one key; ``+``/``-`` and ``<``/``>`` resize.

Committing: the rubric is validated first; then, when the report is not final (checks
still queued or running, a check or the run errored, a suggestion changed after it was
accepted: :meth:`~workstation.review.session.ReviewSession.commit_warnings`), a
confirmation dialog says so and only Enter there commits; the verdict records the checks
that had not finished and where each accepted suggestion came from.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from workstation.review import actions, services
from workstation.review.evidence import finding_source
from workstation.review.services import QueueState
from workstation.review.session import ReviewSession
from workstation.review.taskview import TaskView, load_task_view
from workstation.tui.keymap import PANEL_KEYS, bindings_for
from workstation.tui.messages import (
    Committed,
    HistoryLoaded,
    SessionEvent,
    TokensLoaded,
    TreeKnown,
    ViewLoaded,
)
from workstation.tui.panel_sizes import resized, widened
from workstation.tui.widgets.checks_panel import ChecksPanel
from workstation.tui.widgets.diff_panel import DiffPanel
from workstation.tui.widgets.key_hints import KeyHints
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.profile_panel import ProfilePanel
from workstation.tui.widgets.rationale_area import RationaleArea
from workstation.tui.widgets.rubric_form import RubricForm
from workstation.tui.widgets.rubric_panel import RubricPanel
from workstation.tui.widgets.spec_panel import SpecPanel
from workstation.tui.widgets.text import fit, set_static, unpushed_part
from workstation.tui.widgets.timing_panel import TimingPanel

if TYPE_CHECKING:
    from textual import getters

    from workstation.tui.app import KwsApp

#: the narrowest / lowest terminal that shows every panel side by side.
WIDE_MIN = 120
TALL_MIN = 36
PANELS = ("spec", "diff", "checks", "timing", "rubric", "profile")
TAB_LABELS = {"spec": "Spec", "diff": "Source", "checks": "Checks", "timing": "Timing",
              "rubric": "Rubric", "history": "History", "profile": "Profile"}
#: the narrow layout's tab order.
TABS = ("spec", "diff", "checks", "timing", "rubric", "history", "profile")
#: the profile panel is this many rows taller than the timing panel in their shared slot
#: (a table and bars; the checks panel above gives them up).
PROFILE_EXTRA_ROWS = 8
#: panels that share one slot of the wide layout (the one shown is ``ReviewScreen.slot``).
SLOT_PANELS = ("timing", "profile")


class ReviewScreen(Screen):
    """One task under review. The session (checks, values) lives in the app, so leaving
    and reopening a task keeps it."""

    if TYPE_CHECKING:  # typed as the kws app; at run time Textual's own property (tui.app imports this module)
        app = getters.app(KwsApp)
    BINDINGS = bindings_for("review")
    DEFAULT_CSS = """
    ReviewScreen #review-title { height: 1; background: $panel; text-style: bold; }
    ReviewScreen #panel-tabs { display: none; height: 1; background: $panel; }
    ReviewScreen.-narrow #panel-tabs { display: block; }
    ReviewScreen #columns { height: 1fr; }
    ReviewScreen #col-left { width: 1fr; }
    ReviewScreen #col-right { width: 72; }
    ReviewScreen #spec { height: 14; }
    ReviewScreen #diff { height: 1fr; }
    ReviewScreen #checks { height: 1fr; }
    ReviewScreen #timing, ReviewScreen #profile { height: 10; }
    ReviewScreen #rubric { height: 19; }
    ReviewScreen.-narrow #col-left, ReviewScreen.-narrow #col-right { width: 1fr; }
    ReviewScreen.-narrow Panel { height: 1fr; }
    ReviewScreen .-hidden { display: none; }
    """

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.session: ReviewSession | None = None
        self.active = "checks"
        self.slot = "timing"  # the wide layout shows the timing or the profile panel there
        self.forced_layout: str | None = None
        self.narrow = False
        self.sizes = {"right": 0, "spec": 0, "timing": 10, "rubric": 19}
        self.verdicts: list[Any] = []
        self.unverified: tuple[str, ...] = ()
        self.history_read = False  # the task's records have been read once (verdicts is true)
        self._dispute_waiting = False  # D pressed before that: the dialog opens when they are
        self._reuse_pending = False  # a stored run may be shown again once the task version is known
        self._then_next = False
        self.task_title = ""
        self.files_ready = False
        self._view: TaskView | None = None
        self._painted = False
        # the task view is built in a worker started here, on the Enter that opens the task,
        # so it is usually ready by on_mount (composing and mounting the screen take longer)
        # and the first frame shows the spec; otherwise the screen paints with its
        # placeholders and ViewLoaded brings the spec when it is ready
        self._view_lock = threading.Lock()
        self._view_built: tuple[TaskView, Any] | None = None
        self._view_waited = False
        self.app.run_worker(self._build_view, thread=True, group="review-files",
                            description=f"task view of {task_id}")

    def compose(self) -> ComposeResult:
        yield Static(f" {self.task_id}", id="review-title", markup=False)
        yield Static("", id="panel-tabs")
        with Horizontal(id="columns"):
            with Vertical(id="col-left"):
                yield SpecPanel("Spec", id="spec")
                yield DiffPanel("Source", id="diff")
            with Vertical(id="col-right"):
                yield ChecksPanel("Checks", id="checks")
                yield TimingPanel("Timing", id="timing")
                yield ProfilePanel("Profile", id="profile")
                yield RubricPanel("Rubric", id="rubric")
        yield KeyHints()

    def on_mount(self) -> None:
        app = self.app
        app.queue_changed.subscribe(self, self._queue_changed, immediate=True)
        app.session_event.subscribe(self, self._session_event, immediate=True)
        self.session = app.session_for(self.task_id)
        self.query_one(ChecksPanel).bind_session(self.session)
        self.query_one(TimingPanel).bind_session(self.session)
        self.query_one(ProfilePanel).bind_session(self.session)
        self.query_one(RubricPanel).bind_session(self.session)
        self._title()
        self.apply_layout()
        self.query_one(ChecksPanel).focus_main()
        # the task's files are read, parsed and diffed in a worker (started in __init__):
        # shown now when it is done, else the screen paints with "loading the spec…" and
        # the spec and sources follow (issue 30: the UI thread never waits on the task's
        # files, git or the check server)
        with self._view_lock:
            built = self._view_built
            self._view_waited = built is None
        if built is not None:
            self.show_view(*built)
        # everything else starts once the first frame is out: worker threads compete with
        # the UI thread for the GIL (syntax highlighting, git)
        self.call_after_refresh(self._after_first_paint)

    def _after_first_paint(self) -> None:
        self._painted = True
        self.load_history()
        if self._view is not None:
            self.load_meta(self._view)
        s = self.session
        if s is not None and not s.rows and s.run_started is None:
            if s.stored_report is not None:
                self._reuse_pending = True  # decided when the task's version is known (TreeKnown)
                if self._view is None:
                    return
            else:
                self.app.run_checks(s)

    def _reuse_or_run(self, s: ReviewSession, tree: services.TaskTree) -> None:
        """Reopening a task whose draft holds a finished run of this very version (same
        task tree, kws version and seeds): show it, marked as stored, instead of running the
        battery again; anything else runs it."""
        import workstation

        if s.rows or s.run_started is not None:
            return
        why = services.reuse_refusal(s.stored_report, tree, workstation.__version__)
        if why:
            self.app.run_checks(s)
            return
        s.load_stored()
        when = f" of {s.stored_at:%Y-%m-%d %H:%M} UTC" if s.stored_at else ""
        self.query_one(ChecksPanel).refresh_checks()
        self.query_one(TimingPanel).refresh_timing()
        self.query_one(ProfilePanel).refresh_profile()
        self.query_one(RubricPanel).refresh_rubric()
        self.notify(f"results of your draft's run{when} shown again: same task version, kws version and "
                    "seeds (R re-runs every check)", timeout=6)

    # -- layout ----------------------------------------------------------------------------------

    def on_descendant_focus(self) -> None:
        self.query_one(KeyHints).update_hints()

    def on_resize(self) -> None:
        self.apply_layout()
        self._title()

    def apply_layout(self) -> None:
        w, h = self.size.width, self.size.height
        if self.forced_layout is not None:
            narrow = self.forced_layout == "tabs"
        else:
            narrow = w < WIDE_MIN or h < TALL_MIN
        self.narrow = narrow
        self.set_class(narrow, "-narrow")
        left, right = self.query_one("#col-left"), self.query_one("#col-right")
        if narrow:
            active = self.active
            for p in PANELS:
                self.query_one(f"#{p}").set_class(p != active, "-hidden")
            left.set_class(active not in ("spec", "diff"), "-hidden")
            right.set_class(active in ("spec", "diff"), "-hidden")
            left.styles.width = right.styles.width = "1fr"
            for p in PANELS:
                self.query_one(f"#{p}").styles.height = "1fr"
            tab = "history" if active == "spec" and self.query_one(SpecPanel).showing == "history" else active
            self._tab_bar(tab)
        else:
            for p in PANELS:
                self.query_one(f"#{p}").set_class(p in SLOT_PANELS and p != self.slot, "-hidden")
            left.remove_class("-hidden")
            right.remove_class("-hidden")
            body = max(10, h - 2)
            if not self.sizes["right"]:
                # the checks column: 44% of the width, at least 52 cells (finding summaries stay
                # readable), at most 84; the source gets the rest (68 cells at 120 columns)
                self.sizes["right"] = min(84, max(52, int(w * 0.44)))
            if not self.sizes["spec"]:
                self.sizes["spec"] = max(6, int(body * 0.3))
            right.styles.width = self.sizes["right"]
            left.styles.width = "1fr"
            self.query_one("#spec").styles.height = self.sizes["spec"]
            self.query_one("#diff").styles.height = "1fr"
            self.query_one("#checks").styles.height = "1fr"
            self.query_one("#timing").styles.height = self.sizes["timing"]
            self.query_one("#profile").styles.height = self.sizes["timing"] + PROFILE_EXTRA_ROWS
            self.query_one("#rubric").styles.height = self.sizes["rubric"]
        m = self.maximized
        for p in PANELS:
            panel = self.query_one(f"#{p}")
            if panel is m:
                panel.styles.height, panel.styles.width = "1fr", "1fr"
            else:
                panel.styles.width = None

    def panel_of(self, widget: Any) -> Panel | None:
        node = widget
        while node is not None and not isinstance(node, Panel):
            node = node.parent
        return node

    @property
    def focused_panel(self) -> str:
        p = self.panel_of(self.focused) if self.focused is not None else None
        return p.id if p is not None and p.id else self.active

    def action_show_panel(self, name: str) -> None:
        spec = self.query_one(SpecPanel)
        if name in ("history", "spec"):
            spec.show(name)
            name = "spec"
        if name in SLOT_PANELS:
            self.slot = name
        self.active = name
        if self.maximized is not None:
            self.minimize()
        self.apply_layout()
        panel = self.query_one(f"#{name}", Panel)
        if name == "rubric":
            self.set_focus(self.query_one(RubricForm))
        elif name != "spec":
            panel.focus_main()

    def action_next_panel(self) -> None:
        self._cycle(1)

    def action_prev_panel(self) -> None:
        self._cycle(-1)

    def _cycle(self, step: int) -> None:
        cur = self.focused_panel
        i = PANELS.index(cur) if cur in PANELS else 0
        self.action_show_panel(PANELS[(i + step) % len(PANELS)])

    def _tab_bar(self, active: str) -> None:
        """The narrow layout's tab bar: every panel with its number (alt+number shows it),
        the shown one in reverse video and brackets (readable without colour)."""
        bar = Text()
        for p in TABS:
            label = f"{PANEL_KEYS[p]} {TAB_LABELS[p]}"
            if p == active:
                bar.append(f"[{label}]", style="reverse bold")
            else:
                bar.append(f" {label} ")
        set_static(self.query_one("#panel-tabs", Static), bar)

    def action_toggle_maximize(self) -> None:
        """Maximise the focused panel (any of them: it fills the screen, not only its own
        height) or restore the layout."""
        if self.maximized is not None:
            self.minimize()
            return
        p = self.panel_of(self.focused) if self.focused is not None else None
        if p is None:
            p = self.query_one(f"#{self.active}", Panel)
        self.maximize(p, container=False)

    def watch_maximized(self, _old: Any, _new: Any) -> None:
        """Maximised or restored (by ``z``, Esc or Textual itself): lay the panels out
        again, the maximised one filling the screen."""
        if self.is_mounted:
            self.apply_layout()

    def action_toggle_layout(self) -> None:
        self.forced_layout = "columns" if self.narrow else "tabs"
        self.apply_layout()

    def _resize(self, delta: int) -> None:
        if self.narrow:
            self.app.bell()
            return
        resized(self.sizes, self.focused_panel, delta, self.size.height)
        self.apply_layout()

    def action_grow_panel(self) -> None:
        self._resize(2)

    def action_shrink_panel(self) -> None:
        self._resize(-2)

    def action_wider_panel(self) -> None:
        self._width(4)

    def action_narrower_panel(self) -> None:
        self._width(-4)

    def _width(self, delta: int) -> None:
        if self.narrow:
            return
        widened(self.sizes, self.focused_panel, delta, self.size.width)
        self.apply_layout()

    # -- title -----------------------------------------------------------------------------------

    def _title(self) -> None:
        row = self.app.row(self.task_id)
        parts = [f" {self.task_id}"]
        if self.app.sandbox_marker:
            parts.append(self.app.sandbox_marker)
        parts += unpushed_part(self.app.queue)
        if self.task_title:
            parts.append(self.task_title)
        if row is not None and row.summary is not None:
            parts.append(f"{row.summary.kind}/{row.summary.backend}")
            parts.append(f"claims {row.claimed_label}")
            if row.mine:
                parts.append(f"your verdict: {row.mine}")
            if row.open_disputes:
                parts.append(f"⚑ {row.open_disputes} open dispute(s)")
        set_static(self.query_one("#review-title", Static), fit(" │ ".join(parts), max(1, self.size.width)))

    def _queue_changed(self, _queue: QueueState) -> None:
        """The app's ``queue_changed`` signal: the title shows this task's flags."""
        self._title()

    # -- loading ---------------------------------------------------------------------------------

    def show_view(self, view: TaskView, spec: Any = None) -> None:
        """Put the spec (``spec``: its renderable, built in the worker; else from
        ``view.spec``) and the diffs on screen, then look up the task version and highlight
        the sources in a worker."""
        if not self.is_attached:
            return  # left before the worker was done
        if view.problem:
            self.query_one(SpecPanel).set_spec(f"**This task does not load:** {view.problem}")
            return
        self.task_title = view.title
        self.files_ready = True
        self.query_one(SpecPanel).set_spec(view.spec, spec)
        self.query_one(DiffPanel).set_files(view.files)
        self._title()
        if self._view is None and self.is_mounted and self._painted:
            self.load_meta(view)  # a large task's view arrived from its worker
        self._view = view

    def _build_view(self) -> None:
        """(A worker thread.) Build the task view (files read, task parsed, diffs) and the
        spec's Markdown renderable; ``on_mount`` shows them if they are ready by then,
        else :class:`ViewLoaded` does."""
        view = load_task_view(services.task_dir(self.app.queue.root, self.task_id))
        spec = None if view.problem else SpecPanel.spec_renderable(view.spec)
        with self._view_lock:
            self._view_built = (view, spec)
            waited = self._view_waited
        if waited:
            self.post_message(ViewLoaded())

    def on_view_loaded(self, _msg: ViewLoaded) -> None:
        if self._view_built is not None:
            self.show_view(*self._view_built)

    @work(thread=True, exclusive=True, group="meta")
    def load_meta(self, view: TaskView) -> None:
        """The task's git tree id (the version a verdict names), then syntax tokens."""
        self.post_message(TreeKnown(services.task_tree(self.app.queue.root, self.task_id)))
        if self.app.highlight:
            from workstation.review.diff import highlight_lines

            for lbl, (oname, otext, nname, ntext) in view.sources.items():
                old_t = highlight_lines(otext, oname) if oname else None
                new_t = highlight_lines(ntext, nname) if nname else None
                self.post_message(TokensLoaded(lbl, old_t, new_t))

    def on_tree_known(self, msg: TreeKnown) -> None:
        s = self.session
        if self._reuse_pending and s is not None:
            self._reuse_pending = False
            self._reuse_or_run(s, services.TaskTree(msg.tree, tuple(msg.dirty)))
        outdated = s.outdated_draft(msg.tree) if s is not None else ""
        if s is not None and not msg.dirty and msg.tree:
            s.task_tree = msg.tree
        if outdated:
            self.query_one(RubricPanel).set_status(outdated, sticky=True)
            self.notify(outdated, severity="warning", timeout=8)
        if msg.dirty:
            self.query_one(RubricPanel).set_status(
                "the task folder has uncommitted changes: a verdict needs a committed version ("
                + ", ".join(msg.dirty[:3]) + ")", sticky=True)

    def on_tokens_loaded(self, msg: TokensLoaded) -> None:
        self.query_one(DiffPanel).set_tokens(msg.label, msg.old, msg.new)

    @work(thread=True, exclusive=True, group="history")
    def load_history(self) -> None:
        """The task's verdicts, disputes and resolutions (git and records)."""
        self.post_message(HistoryLoaded(services.task_history(self.app.queue.root, self.task_id)))

    def on_history_loaded(self, msg: HistoryLoaded) -> None:
        self.verdicts = msg.verdicts
        self.unverified = msg.unverified
        self.history_read = True
        self.query_one(SpecPanel).set_history(msg.text)
        if self._dispute_waiting:
            self._dispute_waiting = False
            self.action_dispute()

    # -- checks ----------------------------------------------------------------------------------

    def _session_event(self, event: SessionEvent) -> None:
        """The app's ``session_event`` signal: a check event was applied to a session."""
        if event.session is not self.session or not self.is_attached or self.app.screen is not self:
            return  # another task's, or leaving: the session keeps the events, a reopened screen shows them
        kind = event.kind
        self.query_one(ChecksPanel).refresh_checks()
        if kind in ("check_finished", "done", "error"):
            self.query_one(TimingPanel).refresh_timing()
            self.query_one(ProfilePanel).refresh_profile()
            self.query_one(RubricPanel).refresh_rubric()
        if kind == "error" and self.session is not None:
            self.notify(f"checks: {self.session.error}", severity="error", timeout=10)

    def on_checks_panel_rerun(self, msg: ChecksPanel.Rerun) -> None:
        self.rerun_check(msg.check)

    def rerun_check(self, check: str) -> None:
        """Run check ``check`` again on this task (once the current run is over)."""
        if self.session is not None:
            if self.session.running:
                self.notify("checks are still running; re-run when they finish", timeout=3)
                return
            self.app.run_checks(self.session, [check])
            self.query_one(ChecksPanel).refresh_checks()

    def action_rerun_all(self) -> None:
        if self.session is None:
            return
        if self.session.running:
            self.notify("checks are still running", timeout=3)
            return
        self.app.run_checks(self.session)
        self.query_one(ChecksPanel).refresh_checks()
        self.query_one(TimingPanel).refresh_timing()

    def action_rerun_timing(self) -> None:
        if self.session is None:
            return
        ids = [c for c in self.session.timing_checks if c in self.session.rows]
        if not ids:
            self.notify("no timing check in this run", timeout=3)
            return
        if self.session.running:
            self.notify("checks are still running", timeout=3)
            return
        self.app.run_checks(self.session, ids)
        self.query_one(ChecksPanel).refresh_checks()
        self.query_one(TimingPanel).refresh_timing()

    def on_checks_panel_selected(self, msg: ChecksPanel.Selected) -> None:
        if msg.finding is None:
            return
        src = finding_source(msg.finding)
        if src is None:
            return
        file, line = src
        diff = self.query_one(DiffPanel)
        side = diff.show_source(file)
        if side is not None:
            diff.view.jump_to_line(line, side)

    # -- rubric ----------------------------------------------------------------------------------

    def _after_change(self) -> None:
        rp = self.query_one(RubricPanel)
        rp.sync_rationale()
        rp.refresh_rubric()

    def action_accept_all(self) -> None:
        if self.session is None:
            return
        changed = self.session.accept_all_suggestions()
        self._after_change()
        if not changed:
            self.notify("no suggestion to accept (fields already set, or checks still running)", timeout=3)

    def action_undo(self) -> None:
        if self.session is not None and not self.session.undo():
            self.app.bell()
        self._after_change()

    def action_redo(self) -> None:
        if self.session is not None and not self.session.redo():
            self.app.bell()
        self._after_change()

    def action_prefill_rationale(self) -> None:
        if self.session is None:
            return
        findings = self.query_one(ChecksPanel).selected_findings()
        if not findings:
            findings = [f for f in self.session.findings if f.get("severity") in ("fail", "warn")]
        if not findings:
            self.notify("no finding to cite: mark findings in the checks panel (space)", timeout=4)
            return
        self.session.prefill_rationale(findings)
        self._after_change()
        self.notify(f"cited {len(findings)} finding(s) in the rationale", timeout=3)

    def action_commit(self, then_next: bool = False) -> None:
        """Validate, ask for confirmation when the report is not final, commit (a worker);
        with ``then_next``, open the next unreviewed task once committed."""
        from workstation.tui.screens.confirm import ConfirmScreen

        s = self.session
        if s is None:
            return
        problems = s.problems()
        rp = self.query_one(RubricPanel)
        if problems:
            rp.set_status(rp.PROBLEMS_PREFIX + "; ".join(problems))
            self.notify("verdict not committed:\n" + "\n".join(problems), severity="warning", timeout=6)
            first = problems[0].split(":", 1)[0]
            fields = [f.key for f in s.rubric.choice_fields]
            if first in fields:
                self.query_one(RubricForm).cursor = fields.index(first)
                self.action_show_panel("rubric")
            elif first == s.rubric.rationale_field:
                self.action_show_panel("rubric")
                self.set_focus(self.query_one(RationaleArea))
            return
        warnings = s.commit_warnings()
        if warnings:
            rp.set_status("the report is not final: confirm the commit (Enter) or cancel (Esc)")

            def answered(yes: bool | None) -> None:
                if yes:
                    self._start_commit(then_next)
                else:
                    rp.set_status("not committed (cancelled)")

            self.app.push_screen(ConfirmScreen(
                f"Commit {self.task_id} with a report that is not final?", warnings,
                "Commit anyway? The verdict records the checks that had not finished, those that could "
                "not look and why, and where each accepted suggestion came from."), answered)
            return
        self._start_commit(then_next)

    def action_commit_next(self) -> None:
        self.action_commit(then_next=True)

    def _start_commit(self, then_next: bool) -> None:
        s = self.session
        if s is None:
            return
        self._then_next = then_next
        self.query_one(RubricPanel).set_status("committing…")
        self._commit_worker(s)

    @work(thread=True, exclusive=True, group="commit")
    def _commit_worker(self, s: ReviewSession) -> None:
        self.post_message(Committed(actions.commit_verdict(self.app.queue.root, s)))

    def on_committed(self, msg: Committed) -> None:
        rp = self.query_one(RubricPanel)
        v = msg.verdict
        if v is None:  # not committed: the error says why
            rp.set_status(msg.error)
            self.notify(msg.error, severity="error", timeout=10)
            return
        text = f"committed verdict {v.verdict_id} ({v.overall}) as {v.path}"
        rp.set_status(text)
        self.notify(f"verdict {v.verdict_id[:8]} committed: {v.overall}", timeout=6)
        if self.session is not None:
            self.session.mark_committed()
        self.app.queue.drafts.discard(self.task_id)
        self.app.reload_records()
        self.load_history()
        if self._then_next:
            self._then_next = False
            self.app.open_next_task("unreviewed", after=self.task_id, exclude=(self.task_id,))

    def action_next_task(self) -> None:
        """Open the next task I have not reviewed (after this one), without committing."""
        self.app.open_next_task("unreviewed", after=self.task_id, exclude=(self.task_id,))

    # -- disputes --------------------------------------------------------------------------------

    def action_dispute(self) -> None:
        from workstation.tui.screens.dispute import DisputeScreen

        if not self.history_read:  # never "no verdict" before the records were read
            self._dispute_waiting = True
            self.notify("reading this task's records: the dispute dialog opens when they are read", timeout=4)
            return
        if not self.verdicts:
            unverified = [u for u in self.unverified if u.startswith("verdict ")]
            if unverified:
                self.notify(f"no verdict of this task counts, so none can be disputed: {unverified[-1]} "
                            "(unverified, so it does not count)", severity="warning", timeout=10)
            else:
                self.notify("this task has no verdict to dispute yet", timeout=4)
            return
        if self.session is None:
            return
        if self.app.queue.me is None:  # the dialog's rules, checked before it opens
            self.notify(f"a dispute names who made it: {self.app.queue.identity_problem}", severity="warning",
                        timeout=12)
            return
        self.app.push_screen(DisputeScreen(self.task_id, self.verdicts, self.session.rubric), self._dispute_done)

    def _dispute_done(self, result: Any) -> None:
        if not result:
            return
        self._dispute_worker(*result)

    @work(thread=True, exclusive=True, group="commit")
    def _dispute_worker(self, verdict: services.VerdictSummary, fields: dict[str, str], rationale: str) -> None:
        out = actions.commit_dispute(self.app.queue.root, verdict.verdict_id, fields, rationale,
                                      self.session.rubric if self.session else None)
        if out.error:
            self.app.call_from_thread(self.notify, out.error, severity="error", timeout=10)
            return
        self.app.call_from_thread(self.notify, f"dispute {out.dispute_id[:8]} committed on verdict {verdict.verdict_id[:8]}",
                                  timeout=6)
        self.app.call_from_thread(self.app.reload_records)
        self.app.call_from_thread(self.load_history)

    def action_resolve(self) -> None:
        """Resolve an open dispute of this task (the dialog: outcome, values, rationale)."""
        self.app.resolve_disputes(self.task_id, after=self.load_history)

    # -- leaving ---------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        self.app.pop_screen()

