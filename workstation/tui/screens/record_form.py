"""RecordForm: the modal form shared by the dispute and resolution screens: one of several
records to answer (cycled with ``ctrl+n``), a :class:`~workstation.tui.widgets.pick_rows.PickRows`
form, a required rationale, ``ctrl+s`` to commit, Esc to cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from workstation.tui.widgets.pick_rows import PickRows

if TYPE_CHECKING:
    from textual import getters

    from workstation.tui.app import KwsApp

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
    (the status line's key summary), :attr:`KIND` (the record kind its drafts are kept
    under), and implement :meth:`make_form`, :meth:`form_title`, :meth:`head`,
    :meth:`show_item`, :meth:`target`, :meth:`capture`, :meth:`restore`, :meth:`problems`
    and :meth:`result`; ``self.items`` are the records, ``self.index`` the one shown.

    Drafts: what is entered for each record (picks and rationale) is saved on every change
    in the app's draft saver (``services.FormDraft``, one per queue, kind and record) and
    restored when the form shows that record again, after Esc, ``ctrl+n`` or a restart;
    the draft is deleted once the record is committed."""

    if TYPE_CHECKING:  # typed as the kws app; at run time Textual's own property
        app = getters.app(KwsApp)
    PREFIX = "form"
    RATIONALE_LABEL = "Rationale (required):"
    KEYS = ""
    KIND = ""

    def __init__(self, task_id: str, items: list[Any], rubric: Any) -> None:
        super().__init__()
        self.task_id = task_id
        self.items = items
        self.rubric = rubric
        self.index = 0
        self._restoring = False

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

    def target(self, item: Any) -> str:
        """The id of the record ``item`` the form answers (its drafts are kept under it)."""
        raise NotImplementedError

    def capture(self, form: Any) -> tuple[dict[str, str], str | None]:
        """What ``form`` holds: (picked values, outcome or None)."""
        raise NotImplementedError

    def restore(self, form: Any, values: dict[str, str], outcome: str | None) -> None:
        """Put a draft's ``values`` and ``outcome`` back into ``form``."""
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
            # where the record goes and as whom, before anything is typed (as the CLI says it)
            me = self.app.queue.me
            v.border_subtitle = f"commits to {self.app.queue.root} as {me if me is not None else 'no git identity'}"
            yield Static("", id=f"{self.PREFIX}-head", markup=False)
            yield self.make_form(self.items[0])
            yield Static(self.RATIONALE_LABEL, markup=False)
            yield TextArea(id=f"{self.PREFIX}-rationale", soft_wrap=True)
            yield Static(self.KEYS, id=f"{self.PREFIX}-status", markup=False)

    def on_mount(self) -> None:
        self._show_head()
        self._restore_draft()
        self.query_one(PickRows).focus()

    def _show_head(self) -> None:
        self.query_one(f"#{self.PREFIX}-head", Static).update(self.head(self.items[self.index]))

    # -- drafts --------------------------------------------------------------------------

    @property
    def _rationale(self) -> TextArea:
        return self.query_one(f"#{self.PREFIX}-rationale", TextArea)

    def _restore_draft(self) -> None:
        """Show the saved draft of the record on screen (nothing entered when none)."""
        from workstation.review import actions

        item = self.items[self.index]
        d = actions.load_form_draft(self.app.queue.root, self.KIND, self.target(item)) if self.KIND else None
        self._restoring = True
        try:
            if d is not None:
                self.restore(self.query_one(PickRows), d.values, d.outcome)
                self.query_one(PickRows).refresh(layout=True)
            self._rationale.load_text(d.rationale if d is not None else "")
        finally:
            self._restoring = False
        if d is not None and d.updated is not None:
            self.query_one(f"#{self.PREFIX}-status", Static).update(
                f"your draft of {d.updated:%Y-%m-%d %H:%M} UTC, restored · {self.KEYS}")

    def _save_draft(self) -> None:
        """Hand what the form holds for the record on screen to the app's draft saver."""
        if self._restoring or not self.KIND:
            return
        from workstation.review import actions

        item = self.items[self.index]
        values, outcome = self.capture(self.query_one(PickRows))
        d = actions.new_form_draft(self.app.queue.root, self.KIND, self.task_id, self.target(item))
        d.values, d.outcome, d.rationale = dict(values), outcome, self._rationale.text
        self.app.saver.submit(d)

    def on_pick_rows_changed(self, event: PickRows.Changed) -> None:
        event.stop()
        self._save_draft()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._save_draft()

    # -- actions -------------------------------------------------------------------------

    def action_next_item(self) -> None:
        self._save_draft()
        self.index = (self.index + 1) % len(self.items)
        self.show_item(self.query_one(PickRows), self.items[self.index])
        self._show_head()
        self._restore_draft()

    def action_cancel(self) -> None:
        self._save_draft()
        self.dismiss(None)

    def action_submit(self) -> None:
        form = self.query_one(PickRows)
        rationale = self._rationale.text
        problems = self.problems(form, rationale)
        if problems:
            self.query_one(f"#{self.PREFIX}-status", Static).update("not committed yet: " + "; ".join(problems))
            return
        self._save_draft()
        self.app.saver.flush(2.0)  # on disk before the commit deletes it: no stale draft after
        self.dismiss(self.result(form, self.items[self.index], rationale))
