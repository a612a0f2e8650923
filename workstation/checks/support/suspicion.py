"""A hack-class signal a check saw and could not confirm (issue 39, "one rule for suspicion";
:mod:`workstation.engine.suspicion` holds the kinds and the report's nets).

:func:`suspect` leaves the check not judged with the reason (``ctx.could_not_judge``: the
report lists it under ``not_judged``, exit 4) and returns the evidence tag the finding
carries (``{"suspicion": kind}``), so the finding keeps its severity (``warn``: what the
check saw) while the report never exits 0 on it. A signal the check confirmed is a ``fail``
with its evidence instead, and needs no tag.
"""

from __future__ import annotations

from typing import Any

from workstation.engine.context import CheckContext
from workstation.engine.suspicion import SUSPICIONS


def suspect(ctx: CheckContext, kind: str, reason: str, *, static_vs_run: bool = False) -> dict[str, Any]:
    """Record that this check saw a ``kind`` signal (:data:`SUSPICIONS`) it could not confirm
    (``reason``: what it saw, one line) and return the evidence tag for its finding;
    ``static_vs_run``: a static reading the run did not bear out (a disagreement by itself).

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in SUSPICIONS:
        raise ValueError(f"unknown suspicion {kind!r}; one of {', '.join(SUSPICIONS)}")
    ctx.could_not_judge(f"{reason[:300]} ({SUSPICIONS[kind]}; not confirmed)")
    return {"suspicion": kind, **({"static_vs_run": True} if static_vs_run else {})}
