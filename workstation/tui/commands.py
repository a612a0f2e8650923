"""The command palette's kws commands (a Textual ``Provider``): open a task, next
unreviewed, re-run checks, commit, dispute, switch keymap, and the other review actions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider


class KwsCommands(Provider):
    """Every kws action by name, plus "Open task: <id>" for each task of the queue."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app
        screen = app.screen
        from workstation.tui.screens.queue import QueueScreen
        from workstation.tui.screens.review import ReviewScreen

        def run(action: str, target: Any = None) -> Callable[[], Any]:
            return partial(app.call_later, (target or screen).run_action, action)

        yield ("Next unreviewed task", "Open the next task you have not reviewed", self._open_next_unreviewed)
        for name in ("default", "vim"):
            yield (f"Switch keymap: {name}", f"Use the {name} keymap (your keymap.toml still applies)",
                   partial(app.apply_keymap, name))
        yield ("Show keys", "List every action and its keys", partial(app.action_show_keys))
        if isinstance(screen, ReviewScreen):
            yield ("Re-run all checks", "Run the whole battery again on this task", run("rerun_all"))
            yield ("Re-run timing", "Run the timing checks again", run("rerun_timing"))
            if screen.session is not None:
                for cid in screen.session.rows:
                    yield (f"Re-run check: {cid}", f"Run {cid} again on this task",
                           partial(app.call_later, screen.rerun_check, cid))
            yield ("Commit verdict", "Validate the rubric and commit the verdict to git", run("commit"))
            yield ("Dispute a verdict", "Disagree with a field of an existing verdict, with a rationale", run("dispute"))
            yield ("Accept all suggestions", "Take kws's suggestion for every empty field", run("accept_all"))
            yield ("Cite findings in the rationale", "Add the marked (or all warn/fail) findings", run("prefill_rationale"))
            yield ("Undo rubric change", "Undo the last rubric change", run("undo"))
            yield ("Toggle unified/split diff", "Switch the source viewer's view", partial(
                app.call_later, screen.query_one("#source").action_toggle_view))
            yield ("Maximise or restore panel", "Toggle the focused panel full screen", run("toggle_maximize"))
            yield ("Show history", "Verdicts, disputes and resolutions of this task", run("show_panel('history')"))
            yield ("Show spec", "The task's specification", run("show_panel('spec')"))
            yield ("Toggle tabs/columns layout", "Switch between side-by-side panels and tabs", run("toggle_layout"))
            yield ("Back to the queue", "Leave this task (its checks keep running)", run("back"))
        if isinstance(screen, QueueScreen):
            yield ("Reload queue", "Re-read tasks and records from disk", run("refresh_queue"))
            yield ("Cycle sort key", "Sort by the next column", run("cycle_sort"))
        for row in app.queue.rows:
            yield (f"Open task: {row.id}", row.summary.title, partial(self._open, row.id))

    def _open(self, task_id: str) -> None:
        from workstation.tui.screens.queue import QueueScreen
        from workstation.tui.screens.review import ReviewScreen

        app: Any = self.app
        while isinstance(app.screen, ReviewScreen):
            app.pop_screen()
        qs = app.screen
        if isinstance(qs, QueueScreen):
            qs.open_task(task_id)

    def _open_next_unreviewed(self) -> None:
        from workstation.review.queueview import next_unreviewed
        from workstation.tui.screens.queue import QueueScreen
        from workstation.tui.screens.review import ReviewScreen

        app: Any = self.app
        after = app.screen.task_id if isinstance(app.screen, ReviewScreen) else None
        qs = next((s for s in app.screen_stack if isinstance(s, QueueScreen)), None)
        rows = qs.shown if qs is not None else app.queue.rows
        nxt = None
        if after is None and qs is not None and qs.table.current is not None:
            cur = qs.table.current  # on the queue screen the row under the cursor counts too
            if cur.mine is None and (not cur.reserved_by or cur.reserved_by_me):
                nxt = cur
            after = cur.id
        nxt = nxt or next_unreviewed(rows, after)
        if nxt is None:
            app.notify("no unreviewed task left", timeout=4)
            return
        self._open(nxt.id)

    async def discover(self) -> Hits:
        for i, (name, help_, cb) in enumerate(self._commands()):
            if name.startswith("Open task: ") and i > 40:
                break
            yield DiscoveryHit(name, cb, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_, cb in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)
