"""The dispute screen: disagree with fields of a verdict of this task, with a rationale."""

from __future__ import annotations

from typing import Any

from workstation.review.services import VerdictSummary
from workstation.rubric.model import Rubric
from workstation.tui.screens.record_form import RecordForm, form_bindings, form_css
from workstation.tui.widgets.dispute_fields import DisputeFields

__all__ = ["DisputeScreen"]


class DisputeScreen(RecordForm):
    """Dispute a verdict of this task: pick the fields you disagree with (value keys),
    write the rationale, ctrl+s commits, Esc cancels. ctrl+n cycles verdicts.

    Dismissed with ``(verdict, fields, rationale)`` (the :class:`VerdictSummary`
    disputed, the disputer's values) to commit, or None when cancelled."""

    BINDINGS = form_bindings("Commit dispute", "Other verdict")
    DEFAULT_CSS = form_css("DisputeScreen", "dispute", "90%", 100)
    PREFIX = "dispute"
    KIND = "dispute"
    KEYS = ("value keys pick · ↑/↓ field · tab to the rationale · ctrl+s commit · "
            "ctrl+n other verdict · Esc cancel")

    def __init__(self, task_id: str, verdicts: list[VerdictSummary], rubric: Rubric) -> None:
        super().__init__(task_id, list(reversed(verdicts)), rubric)  # newest first

    def make_form(self, item: VerdictSummary) -> DisputeFields:
        return DisputeFields(self.rubric, item)

    def form_title(self) -> str:
        marker = getattr(self.app, "sandbox_marker", "")
        return f"Dispute a verdict on {self.task_id}" + (f" · {marker}" if marker else "")

    def head(self, v: VerdictSummary) -> str:
        return (f"verdict {v.verdict_id[:8]} by {v.reviewer} at {v.timestamp:%Y-%m-%d %H:%M}Z: {v.overall}"
                f"  ({self.index + 1}/{len(self.items)})")

    def show_item(self, form: DisputeFields, item: VerdictSummary) -> None:
        form.verdict = item
        form.values = {}
        form.refresh(layout=True)

    def target(self, item: VerdictSummary) -> str:
        return item.verdict_id

    def capture(self, form: DisputeFields) -> tuple[dict[str, str], str | None]:
        return dict(form.values), None

    def restore(self, form: DisputeFields, values: dict[str, str], outcome: str | None) -> None:
        allowed = {f.key: {v.value for v in f.values} for f in form.fields}
        form.values = {k: v for k, v in values.items()
                       if v in allowed.get(k, ()) and form.verdict.values.get(k) != v}

    def problems(self, form: DisputeFields, rationale: str) -> list[str]:
        out = []
        if not form.values:
            out.append("pick at least one field value that differs from the verdict")
        if not rationale.strip():
            out.append("a dispute needs a rationale")
        return out

    def result(self, form: DisputeFields, item: VerdictSummary, rationale: str) -> Any:
        return (item, dict(form.values), rationale)
