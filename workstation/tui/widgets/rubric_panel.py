"""RubricPanel: the rubric form, the rationale editor and the commit status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Static, TextArea

from workstation.review.session import ReviewSession
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.rationale_area import RationaleArea
from workstation.tui.widgets.rubric_form import RubricForm
from workstation.tui.widgets.text import set_static

__all__ = ["RubricPanel"]


class RubricPanel(Panel):
    """The rubric form, the focused field's keys, suggestion and the findings behind it,
    and the rationale editor."""

    DEFAULT_CSS = """
    RubricPanel #rationale-label { height: 1; }
    RubricPanel RationaleArea { height: 1fr; min-height: 3; border: none; padding: 0; }
    RubricPanel RationaleArea:focus { border: none; background: $boost; }
    RubricPanel #rubric-status { height: auto; max-height: 2; }
    """

    def __init__(self, title: str, *, on_change: Callable[[], None] | None = None, **kw: Any) -> None:
        """``on_change`` is called after the reviewer changed a value in the form."""
        super().__init__(title, **kw)
        self._on_change = on_change
        self._status = ""
        self._sticky = False

    def compose(self) -> ComposeResult:
        yield RubricForm(id="rubric-form", on_change=self._form_changed)
        yield Static("", id="rationale-label", markup=False)
        yield RationaleArea(id="rationale", soft_wrap=True, show_line_numbers=False)
        yield Static("", id="rubric-status", markup=False)

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None
        self._syncing = False

    @property
    def form(self) -> RubricForm:
        return self.query_one(RubricForm)

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.form.bind_session(session)
        self.sync_rationale()
        self.refresh_rubric()

    def sync_rationale(self) -> None:
        """Put the session's rationale into the editor (after undo, prefill, restore)."""
        if self.session is None:
            return
        area = self.query_one(RationaleArea)
        if area.text != self.session.rationale:
            self._syncing = True
            area.load_text(self.session.rationale)
            self._syncing = False

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._syncing or self.session is None:
            return
        event.stop()
        if self.session.set_rationale(event.text_area.text):
            self._changed_by_reviewer()
            self.refresh_rubric(form=False)

    #: the prefix of the status line that lists what stops a commit (kept true as fields change)
    PROBLEMS_PREFIX = "not committed: "

    def set_status(self, text: str, *, sticky: bool = False) -> None:
        """Show ``text`` under the rationale. A line about the last commit attempt ("not
        committed (cancelled)", a refused commit, "committed verdict ...") goes at the
        reviewer's next change; a ``sticky`` one (the task folder is dirty, the draft is
        outdated) stays until it is replaced."""
        self._status = text
        self._sticky = sticky
        set_static(self.query_one("#rubric-status", Static), text)

    def _changed_by_reviewer(self) -> None:
        """The reviewer changed a value or the rationale: a line about an earlier commit
        attempt is stale now (the problems line is recomputed instead)."""
        if self._status and not self._sticky and \
                not self._status.startswith(self.PROBLEMS_PREFIX):
            self.set_status("")

    def _refresh_problems_status(self) -> None:
        """A "not committed: …" line lists what still stops the commit: it shrinks as the
        reviewer fills the fields and goes once nothing does (never stale)."""
        if self.session is None or not self._status.startswith(self.PROBLEMS_PREFIX):
            return
        problems = self.session.problems()
        self.set_status(self.PROBLEMS_PREFIX + "; ".join(problems) if problems else "")

    def refresh_rubric(self, form: bool = True) -> None:
        s = self.session
        if s is None:
            return
        if form:
            self.form.refresh()
        rf = s.rubric.field(s.rubric.rationale_field)
        need = [f"{x.key} is {s.values[x.key]}" for x in s.rubric.choice_fields if s.values.get(x.key) in x.rationale_for]
        label = f"{rf.label if rf else 'Rationale'}" + (f" (required: {', '.join(need)})" if need else "") + ":"
        set_static(self.query_one("#rationale-label", Static), label)
        self._refresh_problems_status()

    def _form_changed(self) -> None:
        self._changed_by_reviewer()
        self.refresh_rubric(form=False)
        if self._on_change is not None:
            self._on_change()

    def on_rubric_form_changed(self, event: RubricForm.Changed) -> None:
        event.stop()  # handled in _form_changed already
