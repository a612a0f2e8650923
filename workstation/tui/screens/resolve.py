"""The resolution dialog: adjudicate an open dispute of this task, citing both sides."""

from __future__ import annotations

from typing import Any

from workstation.review.actions import DisputeSummary
from workstation.tui.screens.record_form import RecordForm, form_bindings, form_css
from workstation.tui.widgets.resolve_fields import OUTCOME_MEANS, OUTCOMES, ResolveFields

__all__ = ["ResolveScreen"]


class ResolveScreen(RecordForm):
    """Resolve one of the task's open disputes (:class:`DisputeSummary`, oldest first):
    ``1``-``3`` pick the outcome (upheld, overturned, amended; for amended, the values of
    the disputed fields with ``1``-``9``), write the rationale, ``ctrl+s`` commits,
    ``ctrl+n`` moves to the next open dispute, Esc cancels.

    Dismissed with ``(dispute, outcome, fields, rationale)`` or None."""

    BINDINGS = form_bindings("Commit resolution", "Other dispute")
    DEFAULT_CSS = form_css("ResolveScreen", "resolve", "95%", 110)
    PREFIX = "resolve"
    KIND = "resolution"
    RATIONALE_LABEL = "Rationale (required; cite both sides):"
    KEYS = "1-3 outcome · ↑/↓ row · Enter next · ctrl+s commit · ctrl+n other dispute · Esc cancel"

    def __init__(self, task_id: str, disputes: list[DisputeSummary], rubric: Any) -> None:
        super().__init__(task_id, list(disputes), rubric)

    def make_form(self, item: DisputeSummary) -> ResolveFields:
        return ResolveFields(self.rubric, item)

    def form_title(self) -> str:
        return f"Resolve a dispute on {self.task_id}"

    def head(self, d: DisputeSummary) -> str:
        return (f"dispute {d.dispute_id[:8]} by {d.disputer} at {d.timestamp:%Y-%m-%d %H:%M}Z of verdict "
                f"{d.verdict_id[:8]} by {d.verdict_reviewer}  ({self.index + 1}/{len(self.items)})\n"
                f"disputer's rationale: {d.rationale}\n"
                "outcomes: " + "; ".join(f"{i} {o}: {OUTCOME_MEANS[o]}" for i, o in enumerate(OUTCOMES, 1)))

    def show_item(self, form: ResolveFields, item: DisputeSummary) -> None:
        form.set_dispute(item)

    def target(self, item: DisputeSummary) -> str:
        return item.dispute_id

    def capture(self, form: ResolveFields) -> tuple[dict[str, str], str | None]:
        return dict(form.values), form.outcome

    def restore(self, form: ResolveFields, values: dict[str, str], outcome: str | None) -> None:
        form.outcome = outcome if outcome in OUTCOMES else None
        allowed = {}
        for key in form.keys:
            f = form.rubric.field(key) if form.rubric is not None else None
            allowed[key] = {v.value for v in f.values} if f is not None else set()
        form.values = {k: v for k, v in values.items() if v in allowed.get(k, ())} if form.outcome == "amended" else {}

    def problems(self, form: ResolveFields, rationale: str) -> list[str]:
        out = []
        if form.outcome is None:
            out.append("pick an outcome (1 upheld, 2 overturned, 3 amended)")
        elif form.outcome == "amended" and not form.values:
            out.append("amended: pick your value for at least one disputed field")
        if not rationale.strip():
            out.append("a resolution needs a rationale")
        return out

    def result(self, form: ResolveFields, item: DisputeSummary, rationale: str) -> Any:
        return (item, form.outcome, dict(form.values), rationale)
