"""The command palette's kws commands (a Textual ``Provider``): every action of the keymap
(:data:`~workstation.tui.keymap.ACTIONS`) that applies on the screen the palette was opened
on, by name with its keys, plus the actions that take an argument: open a task, next task
to review or reserved by me, reserve or release, resolve a dispute, re-run one check, set a
rubric field to a value, switch keymap.

The palette is a screen of its own: the actions run on the screen under it (Textual's
``Provider.screen``), never on the palette.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from workstation.tui.keymap import ACTIONS, SCREEN_SCOPES, key_display

__all__ = ["KwsCommands"]

#: palette names where the footer's short description would be unclear alone.
NAMES = {
    "app.help": "Show keys", "app.sync": "Sync records (pull and push)", "app.calibration": "Calibration view",
    "app.report": "Report view", "app.quit": "Quit kws", "app.switch_keymap": "Switch keymap (default/vim)",
    "queue.open": "Open the task under the cursor",
    "queue.next_unreviewed": "Move the cursor to the next unreviewed task",
    "queue.next_reserved": "Move the cursor to the next task reserved by me", "queue.filter": "Filter the queue",
    "queue.sort": "Cycle sort key", "queue.reverse": "Reverse the sort", "queue.refresh": "Reload queue",
    "queue.reserve": "Reserve the task under the cursor", "queue.release": "Release the task under the cursor",
    "queue.clear_filter": "Clear the filter", "queue.quit": "Quit (queue)",
    "review.back": "Back to the queue", "review.commit": "Commit verdict",
    "review.commit_next": "Commit verdict and open the next task", "review.next_task": "Skip to the next unreviewed task",
    "review.accept_all": "Accept all suggestions", "review.undo": "Undo rubric change",
    "review.redo": "Redo rubric change", "review.rerun_all": "Re-run all checks", "review.rerun_timing": "Re-run timing",
    "review.dispute": "Dispute a verdict", "review.resolve": "Resolve a dispute",
    "review.prefill": "Cite findings in the rationale", "review.maximize": "Maximise or restore panel",
    "review.layout": "Toggle tabs/columns layout", "review.panel_spec": "Show spec",
    "review.panel_diff": "Show source", "review.panel_checks": "Show checks", "review.panel_timing": "Show timing",
    "review.panel_rubric": "Show rubric", "review.panel_history": "Show history",
    "diff.next_hunk": "Next hunk", "diff.prev_hunk": "Previous hunk", "diff.toggle_view": "Toggle unified/split diff",
    "diff.next_file": "Next task file", "checks.open": "Read the evidence of the finding",
    "checks.mark": "Mark the finding", "checks.rerun": "Re-run the check under the cursor",
    "rubric.confirm": "Confirm the rubric field", "rubric.clear": "Clear the rubric field",
    "rubric.edit_rationale": "Edit the rationale",
}


class KwsCommands(Provider):
    """Every kws action by name (its keys in the help text), plus "Open task: <id>" for
    each task of the queue."""

    def _screen_kind(self) -> str | None:
        from workstation.tui.screens.queue import QueueScreen
        from workstation.tui.screens.review import ReviewScreen

        if isinstance(self.screen, ReviewScreen):
            return "review"
        if isinstance(self.screen, QueueScreen):
            return "queue"
        return None

    def _nodes(self, kind: str | None) -> dict[str, Any]:
        """The widget each binding scope's actions run on, on the screen under the palette."""
        screen: Any = self.screen
        nodes: dict[str, Any] = {"app": self.app}
        if kind == "queue":
            nodes["queue"] = screen
        elif kind == "review":
            from workstation.tui.widgets.checks_panel import ChecksPanel
            from workstation.tui.widgets.rubric_form import RubricForm
            from workstation.tui.widgets.source_view import SourceView

            nodes.update(review=screen, diff=screen.query_one(SourceView), checks=screen.query_one(ChecksPanel),
                         rubric=screen.query_one(RubricForm))
        return nodes

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app
        screen: Any = self.screen
        kind = self._screen_kind()
        nodes = self._nodes(kind)
        scopes = SCREEN_SCOPES.get(kind or "", ("app",))
        keys = app.keymap_load.keys

        def run(action: str, node: Any) -> Callable[[], Any]:
            return partial(app.call_later, app.run_action, action, node)

        task = getattr(screen, "task_id", None) or app.current_task()
        yield ("Next unreviewed task", "Open the next task you have not reviewed (nobody else holds it)",
               partial(app.open_next_task, "unreviewed", task if kind == "review" else None,
                       (task,) if kind == "review" and task else ()))
        yield ("Next task reserved by me", "Open the next task you hold reserved and have not reviewed",
               partial(app.open_next_task, "reserved", task if kind == "review" else None,
                       (task,) if kind == "review" and task else ()))
        for a in ACTIONS:
            if not a.palette or a.scope not in scopes or a.scope not in nodes:
                continue
            k = key_display(keys.get(a.id, a.default))
            yield (NAMES.get(a.id, a.description), f"{a.means} ({k})", run(a.action, nodes[a.scope]))
        if task:
            yield (f"Reserve task: {task}", "Reserve it for 4 hours and sync, so others see it taken",
                   partial(app.reserve, task))
            yield (f"Release task: {task}", "Release your reservation and sync", partial(app.release, task))
            yield (f"Resolve a dispute of {task}", "Adjudicate one of its open disputes, citing both sides",
                   partial(app.resolve_disputes, task, getattr(screen, "load_history", None)))
            yield (f"Report of {task}", "The Markdown report of its current verdict", run("show_report", app))
        for name in ("default", "vim"):
            yield (f"Switch keymap: {name}", f"Use the {name} keymap (your keymap.toml still applies)",
                   partial(app.apply_keymap, name))
        if kind == "review":
            if screen.session is not None:
                for cid in screen.session.rows:
                    yield (f"Re-run check: {cid}", f"Run {cid} again on this task",
                           partial(app.call_later, screen.rerun_check, cid))
            rubric = screen.session.rubric if screen.session is not None else None
            form = nodes["rubric"]
            for f in rubric.choice_fields if rubric is not None else ():
                for i, v in enumerate(f.values, 1):
                    yield (f"Set {f.label}: {v.label}", f"{f.key} = {v.value}",
                           partial(app.call_later, form.set_field, f.key, i))
        for row in app.queue.rows:
            yield (f"Open task: {row.id}", row.summary.title, partial(app.open_task, row.id))

    async def discover(self) -> Hits:
        for i, (name, help_, cb) in enumerate(self._commands()):
            if name.startswith("Open task: ") and i > 60:
                break
            yield DiscoveryHit(name, cb, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_, cb in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)
