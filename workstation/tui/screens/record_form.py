"""RecordForm: the modal form shared by the dispute and resolution screens: one of several
records to answer (cycled with ``ctrl+n``), a :class:`~workstation.tui.widgets.pick_rows.PickRows`
form, a required rationale, ``ctrl+s`` to commit, Esc to cancel."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from workstation.tui.widgets.pick_rows import PickRows

__all__ = ["RecordForm", "form_bindings", "form_css"]


def form_bindings(commit: str, other: str) -> list[BindingType]:
    """Esc cancels, ``ctrl+s`` commits (``commit`` is its label), ``ctrl+n`` moves to the
    next record (``other``)."""
    return [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", commit),
            Binding("ctrl+n", "next_item", other)]


def form_css(screen: str, prefix: str, width: str, max_width: int) -> str:
    """The ``DEFAULT_CSS`` of the record form screen class ``screen`` (its name), whose
    element ids start with ``prefix``: a dialog in the middle, ``width`` of the terminal
    (a CSS size, ``"90%"``) up to ``max_width`` cells, a five-row rationale editor."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > Vertical {{ width: {width}; max-width: {max_width}; height: auto; max-height: 95%;
                               border: round $warning; background: $surface; padding: 0 1; }}
    {screen} TextArea {{ height: 5; }}
    {screen} #{prefix}-head, {screen} #{prefix}-status {{ height: auto; }}
    """


class RecordForm(ModalScreen[Any]):
    """Subclasses set :attr:`PREFIX` (the element ids: ``#<prefix>-head``,
    ``#<prefix>-rationale``, ``#<prefix>-status``), :attr:`RATIONALE_LABEL`, :attr:`KEYS`
    (the status line's key summary), and implement :meth:`make_form`, :meth:`form_title`,
    :meth:`head`, :meth:`show_item`, :meth:`problems` and :meth:`result`; ``self.items``
    are the records, ``self.index`` the one shown."""

    PREFIX = "form"
    RATIONALE_LABEL = "Rationale (required):"
    KEYS = ""

    def __init__(self, task_id: str, items: list[Any], rubric: Any) -> None:
        super().__init__()
        self.task_id = task_id
        self.items = items
        self.rubric = rubric
        self.index = 0

    # -- what subclasses say -------------------------------------------------------------

    def make_form(self, item: Any) -> PickRows:
        raise NotImplementedError

    def form_title(self) -> str:
        raise NotImplementedError

    def head(self, item: Any) -> str:
        raise NotImplementedError

    def show_item(self, form: Any, item: Any) -> None:
        """Point ``form`` at ``item`` (after ``ctrl+n``), forgetting the picks."""
        raise NotImplementedError

    def problems(self, form: Any, rationale: str) -> list[str]:
        """Why the form cannot be committed yet (empty when it can)."""
        raise NotImplementedError

    def result(self, form: Any, item: Any, rationale: str) -> Any:
        """What the screen is dismissed with on commit."""
        raise NotImplementedError

    # -- the form ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = self.form_title()
            yield Static("", id=f"{self.PREFIX}-head", markup=False)
            yield self.make_form(self.items[0])
            yield Static(self.RATIONALE_LABEL, markup=False)
            yield TextArea(id=f"{self.PREFIX}-rationale", soft_wrap=True)
            yield Static(self.KEYS, id=f"{self.PREFIX}-status", markup=False)

    def on_mount(self) -> None:
        self._show_head()
        self.query_one(PickRows).focus()

    def _show_head(self) -> None:
        self.query_one(f"#{self.PREFIX}-head", Static).update(self.head(self.items[self.index]))

    def action_next_item(self) -> None:
        self.index = (self.index + 1) % len(self.items)
        self.show_item(self.query_one(PickRows), self.items[self.index])
        self._show_head()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        form = self.query_one(PickRows)
        rationale = self.query_one(f"#{self.PREFIX}-rationale", TextArea).text
        problems = self.problems(form, rationale)
        if problems:
            self.query_one(f"#{self.PREFIX}-status", Static).update("; ".join(problems))
            return
        self.dismiss(self.result(form, self.items[self.index], rationale))
