"""ResolveFields: the resolution form's outcome and, for ``amended``, the resolver's values."""

from __future__ import annotations

from typing import Any

from workstation.tui.widgets.pick_rows import PickRows
from workstation.tui.widgets.text import fit

__all__ = ["OUTCOMES", "OUTCOME_MEANS", "ResolveFields"]

#: what happens to the disputed verdict (records.model.OUTCOMES, in the order 1-3 pick them).
OUTCOMES = ("upheld", "overturned", "amended")
OUTCOME_MEANS = _MEANS = {"upheld": "the verdict stands as it is", "overturned": "the dispute's values replace the verdict's",
          "amended": "your own values (picked below) replace them"}


class ResolveFields(PickRows):
    """Row 0: the outcome (``1``-``3``); then, one row per disputed field: the verdict's
    value, the disputer's, and (for ``amended``) the resolver's pick (``1``-``9``, the
    field's nth value). Enter moves on; from the last row to the rationale."""

    DEFAULT_CSS = "ResolveFields { height: auto; }"

    def __init__(self, rubric: Any, dispute: Any) -> None:
        super().__init__()
        self.rubric = rubric
        self.cursor = 0
        self.outcome: str | None = None
        self.values: dict[str, str] = {}
        self.set_dispute(dispute)

    def set_dispute(self, dispute: Any) -> None:
        self.dispute = dispute
        self.keys = list(dispute.dispute_values)
        self.cursor, self.outcome, self.values = 0, None, {}
        self.refresh(layout=True)

    def _field(self, key: str) -> Any:
        return self.rubric.field(key) if self.rubric is not None else None

    def row_texts(self) -> list[str]:
        rows = [fit("Outcome", 24) + "  ".join(f"{i} {o}" for i, o in enumerate(OUTCOMES, 1))
                + (f"  → {self.outcome}: {_MEANS[self.outcome]}" if self.outcome else "")]
        for key in self.keys:
            f = self._field(key)
            mine = self.values.get(key)
            rows.append(fit(f.label if f else key, 24)
                        + fit(f"verdict: {self.dispute.verdict_values.get(key, '-')}", 24)
                        + fit(f"dispute: {self.dispute.dispute_values.get(key, '-')}", 24)
                        + (f"→ {mine}" if mine else ""))
        return rows

    def hint(self) -> str:
        f = self._field(self.keys[self.cursor - 1]) if self.cursor else None
        hint = ("1-3 pick the outcome" if self.cursor == 0 else
                "amended: " + "  ".join(f"{i} {v.value}" for i, v in enumerate(f.values, 1)) if f is not None else "")
        return hint + "  · Enter next"

    def pick(self, row: int, n: int) -> bool:
        """Row 0: outcome ``n``; a field row: its ``n``-th value, which makes the outcome
        ``amended``."""
        if row == 0:
            if not 1 <= n <= len(OUTCOMES):
                return False
            self.outcome = OUTCOMES[n - 1]
            if self.outcome != "amended":
                self.values = {}
            return True
        f = self._field(self.keys[row - 1])
        if f is None or not 1 <= n <= len(f.values):
            return False
        self.outcome = "amended"
        self.values[f.key] = f.values[n - 1].value
        return True

    def clear(self, row: int) -> None:
        if row == 0:
            self.outcome = None
        else:
            self.values.pop(self.keys[row - 1], None)
