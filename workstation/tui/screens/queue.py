"""The queue screen: every task of the queue with its review flags, malformed tasks with
file, key and problem, a filter line and a sort key; reserve and release the task under the
cursor, jump to the next task to review or reserved by me. It shows the app's
:class:`~workstation.review.services.QueueState`, anew on each ``queue_changed`` signal;
a missing git identity is explained in full under the title (and looked up again while it
is missing, so setting it in another terminal shows here without a reload)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from workstation.review.actions import ActionOutcome
from workstation.review.queueview import (
    SORT_KEYS,
    QueueRow,
    next_task,
    parse_filter,
    sort_rows,
)
from workstation.review.services import QueueState, problem_lines
from workstation.tui.keymap import bindings_for
from workstation.tui.widgets.filter_input import FilterInput
from workstation.tui.widgets.key_hints import KeyHints
from workstation.tui.widgets.queue_table import QueueTable
from workstation.tui.widgets.text import fit, set_static, unpushed_part

if TYPE_CHECKING:
    from textual import getters

    from workstation.tui.app import KwsApp

FILTER_HINT = ("(no filter: / to type one, e.g. kind:fusion backend:triton claimed:fail reserved:me "
               "disputed:yes mine:no screen:fail failing:edge)")
#: the filter hint on a terminal narrower than :data:`FILTER_HINT` (80 columns)
FILTER_HINT_SHORT = "(no filter: / types one, e.g. kind:fusion mine:no disputed:yes)"


class QueueScreen(Screen):
    """The queue: a virtualised table of tasks, filter and sort, next unreviewed."""

    if TYPE_CHECKING:  # typed as the kws app; at run time Textual's own property (tui.app imports this module)
        app = getters.app(KwsApp)
    BINDINGS = bindings_for("queue")
    DEFAULT_CSS = """
    QueueScreen #queue-title { height: 1; background: $panel; color: $text; text-style: bold; }
    QueueScreen #filter { height: 1; border: none; padding: 0 1; background: $surface; }
    QueueScreen #filter:focus { background: $boost; }
    QueueScreen #queue-status { height: 1; color: $text-muted; }
    QueueScreen #queue-notice { height: auto; color: $warning; padding: 0 1; }
    QueueScreen #queue-notice.-empty { display: none; }
    QueueScreen #malformed-box { height: auto; max-height: 8; border-top: solid $error; }
    QueueScreen #malformed-box.-empty { display: none; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.filter_text = ""
        self.sort_key = "id"
        self.sort_reverse = False
        self.shown: list[QueueRow] = []
        self.outcome = ""  # the last sync, reserve or release outcome, in the status line
        self._pending_open: str | None = None  # a task opened before the rubric was loaded

    def compose(self) -> ComposeResult:
        yield Static("kws", id="queue-title", markup=False)
        yield FilterInput(placeholder=FILTER_HINT, id="filter")
        yield Static("loading the queue…", id="queue-status", markup=False)
        yield Static("", id="queue-notice", markup=False, classes="-empty")
        yield QueueTable(id="queue-table")
        with VerticalScroll(id="malformed-box", classes="-empty"):
            yield Static("", id="malformed", markup=False)
        yield KeyHints()

    def on_mount(self) -> None:
        self.table.focus()
        self.outcome = ""
        self.app.queue_changed.subscribe(self, self.queue_changed, immediate=True)
        self.queue_changed(self.app.queue)
        self.set_interval(5.0, self._identity_tick)

    def _identity_tick(self) -> None:
        q = self.app.queue
        if q.loaded and q.me is None and self.app.screen is self:
            self.app.refresh_identity()

    def on_screen_resume(self) -> None:
        if self.app.queue.loaded and self.app.queue.me is None:
            self.app.refresh_identity()

    def show_outcome(self, out: ActionOutcome) -> None:
        """The outcome of a sync, reserve or release, kept in the status line."""
        self.outcome = out.error or out.text
        if self.app.queue.loaded:
            self._status()

    @property
    def table(self) -> QueueTable:
        return self.query_one(QueueTable)

    # -- data ------------------------------------------------------------------------------

    def queue_changed(self, q: QueueState) -> None:
        """The app's queue state changed (loaded, validated, records reloaded): the app's
        ``queue_changed`` signal."""
        if not q.loaded:
            return
        self.apply_view()
        self._malformed()
        self.call_after_refresh(self.app.first_rows_shown.set)  # the worker goes on after this frame
        pending, self._pending_open = self._pending_open, None
        if pending is not None and q.flags_loaded:
            self.open_task(pending)

    def apply_view(self) -> None:
        q = self.app.queue
        flt = parse_filter(self.filter_text)
        rows = [r for r in q.rows if flt.matches(r)]
        self.shown = sort_rows(rows, self.sort_key, self.sort_reverse)
        cur = self.table.current
        self.table.set_rows(self.shown, keep=cur.id if cur else None)
        self._title()
        self._status(flt.problems)

    def _title(self) -> None:
        q = self.app.queue
        idx = q.index
        name = idx.name if idx else q.root.name
        n = len(q.rows)
        unreviewed = sum(1 for r in q.rows if r.mine is None)
        bad = len(idx.errors) if idx else 0
        who = q.me.name if q.me else "no git identity"
        marker = [self.app.sandbox_marker] if self.app.sandbox_marker else []
        parts = [f" kws · {name}", *marker, *unpushed_part(q),
                 f"{n} tasks" + (f", {bad} malformed" if bad else ""),
                 f"{unreviewed} to review", f"keys: {self.app.keymap_load.name}", who]
        set_static(self.query_one("#queue-title", Static), fit(" │ ".join(parts), max(1, self.size.width)))

    def _status(self, problems: tuple[str, ...] = ()) -> None:
        q = self.app.queue
        arrow = "↓" if self.sort_reverse else "↑"
        parts = [f"sort: {self.sort_key} {arrow}", f"showing {len(self.shown)} of {len(q.rows)}"]
        if q.validating:
            parts.append(f"validating {len(q.index.pending) if q.index else 0} tasks…")
        if q.identity_problem:
            parts.append("no git identity (see above)")
        if self.outcome:
            parts.append(self.outcome)
        if q.rubric_problem:
            parts.append(f"rubric: {q.rubric_problem}")
        parts.extend(problems)
        set_static(self.query_one("#queue-status", Static), fit(" · ".join(parts), max(1, self.size.width)))
        notice = self.query_one("#queue-notice", Static)
        notice.set_class(not q.identity_problem, "-empty")
        set_static(notice, q.identity_problem)

    def _malformed(self) -> None:
        lines = problem_lines(self.app.queue)
        box = self.query_one("#malformed-box")
        box.set_class(not lines, "-empty")
        if lines:
            self.query_one("#malformed", Static).update("\n".join(lines))

    def on_descendant_focus(self) -> None:
        self.query_one(KeyHints).update_hints()

    def on_resize(self) -> None:
        flt = self.query_one("#filter", Input)
        flt.placeholder = FILTER_HINT if self.size.width >= len(FILTER_HINT) + 2 else FILTER_HINT_SHORT
        if self.app.queue.loaded:
            self._title()
            self._status()

    # -- filter ------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        if self.app.queue.loaded:
            self.apply_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.set_focus(self.table)

    def action_focus_filter(self) -> None:
        self.set_focus(self.query_one("#filter", Input))

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""

    def clear_filter_now(self) -> None:
        """Clear the filter and show the whole queue at once (not on the input's next
        ``Changed`` message): the caller goes on with :attr:`shown`."""
        self.filter_text = ""
        with self.prevent(Input.Changed):
            self.query_one("#filter", Input).value = ""
        if self.app.queue.loaded:
            self.apply_view()

    def action_cycle_sort(self) -> None:
        i = SORT_KEYS.index(self.sort_key)
        self.sort_key = SORT_KEYS[(i + 1) % len(SORT_KEYS)]
        self.apply_view()

    def action_reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.apply_view()

    def action_refresh_queue(self) -> None:
        # through set_static, like every status line, so the next status replaces it (a
        # plain update() left the cache naming the old line: "reloading…" stayed for good)
        set_static(self.query_one("#queue-status", Static), "reloading…")
        self.app.load_queue()

    # -- navigation --------------------------------------------------------------------------

    def action_table(self, motion: str) -> None:
        """Move the task cursor: ``motion`` is one of the queue table's cursor actions
        (``cursor_down``, ``cursor_up``, ``page_down``, ``page_up``, ``cursor_top``,
        ``cursor_bottom``)."""
        if motion in ("cursor_down", "cursor_up", "page_down", "page_up", "cursor_top", "cursor_bottom"):
            getattr(self.table, f"action_{motion}")()

    def action_next_unreviewed(self) -> None:
        self._jump("unreviewed", "every task shown is reviewed by you (or reserved by someone else)")

    def action_next_reserved(self) -> None:
        self._jump("reserved", "you hold no reserved task you have not reviewed (r reserves the task under the cursor)")

    def _jump(self, which: str, none: str) -> None:
        cur = self.table.current
        nxt = next_task(self.shown, cur.id if cur else None, which)
        if nxt is None:
            self.notify(none, timeout=4)
            return
        self.table.set_rows(self.shown, keep=nxt.id)

    def action_reserve(self) -> None:
        row = self.table.current
        if row is not None:
            self.app.reserve(row.id)

    def action_release(self) -> None:
        row = self.table.current
        if row is not None:
            self.app.release(row.id)

    def action_open_task(self) -> None:
        row = self.table.current
        if row is None:
            return
        self.open_task(row.id)

    def open_task(self, task_id: str) -> None:
        # imported on the first open, not on the way to the queue's first paint
        from workstation.tui.screens.review import ReviewScreen

        q = self.app.queue
        if not q.flags_loaded:
            self._pending_open = task_id  # the rubric is still loading: open it once it is there
            return
        if q.rubric is None:
            self.notify(f"cannot review without a rubric: {q.rubric_problem}", severity="error", timeout=10)
            return
        if q.index is not None and task_id in q.index.errors:
            self.notify(str(q.index.errors[task_id]), severity="error", timeout=10)
            return
        self.table.set_rows(self.shown, keep=task_id)
        self.app.push_screen(ReviewScreen(task_id))

    def action_quit(self) -> None:
        self.app.exit()

