"""DisputeFields: the dispute form's fields, the verdict's value and the disputer's."""

from __future__ import annotations

from typing import Any

from workstation.tui.widgets.pick_rows import PickRows
from workstation.tui.widgets.text import fit

__all__ = ["DisputeFields"]


class DisputeFields(PickRows):
    """The verdict's choice fields next to the verdict's values
    (:class:`~workstation.review.services.VerdictSummary`); ``1``-``9`` pick the
    disputer's value for the focused field (its nth value; picking the verdict's own
    value clears the pick) and move on, Enter moves on (from the last field to the
    rationale). ``values`` holds the picks."""

    DEFAULT_CSS = "DisputeFields { height: auto; }"

    def __init__(self, rubric: Any, verdict: Any) -> None:
        super().__init__()
        self.rubric = rubric
        self.verdict = verdict
        self.cursor = 0
        self.values: dict[str, str] = {}

    @property
    def fields(self) -> list[Any]:
        return list(self.rubric.choice_fields)

    def row_texts(self) -> list[str]:
        cur = self.verdict.values
        return [fit(f.label, 26) + fit(f"verdict: {cur.get(f.key, '-')}", 26)
                + (f"→ {self.values[f.key]}" if self.values.get(f.key) else "") for f in self.fields]

    def hint(self) -> str | None:
        if not self.fields:
            return None
        f = self.fields[self.cursor]
        return "keys: " + "  ".join(f"{i} {v.value}" for i, v in enumerate(f.values, 1)) + "  Enter next"

    def pick(self, row: int, n: int) -> bool:
        """The disputer's value for field ``row``: its ``n``-th value (the verdict's own
        value clears the pick)."""
        f = self.fields[row] if self.fields else None
        if f is None or not 1 <= n <= len(f.values):
            return False
        v = f.values[n - 1]
        if self.verdict.values.get(f.key) == v.value:
            self.values.pop(f.key, None)
        else:
            self.values[f.key] = v.value
        return True

    def clear(self, row: int) -> None:
        if self.fields:
            self.values.pop(self.fields[row].key, None)
