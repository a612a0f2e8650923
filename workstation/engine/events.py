"""Engine events as JSON-ready data: what the check server writes to the app, one event per
line, and what a review session applies (:class:`workstation.review.session.ReviewSession`).

A light module: it imports the standard library and :mod:`workstation.engine.report`
(itself free of the engine, torch and numpy) and nothing else, so the check server and the
tests can use it without loading checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workstation.engine.report import finite_json, to_json_dict

__all__ = ["normalise_event"]


def normalise_event(kind: str, data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An engine event (:func:`workstation.engine.run.run_checks`) as JSON-ready data.

    ``start`` -> ``{"checks": [ids], "device": label, "timing_checks": [ids],
    "timing_evidence_checks": [ids]}``; ``check_started`` -> ``{"check": id}``;
    ``check_finished`` -> ``{"result": {"check", "status", "seconds", "reason",
    "findings": [finding dicts], "not_judged": why it could not look or ""}}``; ``done`` -> ``{"report": <kws check --json dict>}``.
    Non-finite floats become "nan"/"inf"/"-inf" as in the contract's JSON.
    """
    if kind == "check_finished":
        r = data["result"]
        if hasattr(r, "as_dict"):
            d = r.as_dict()
            d["findings"] = [f.as_dict() for f in r.findings]
            d["not_judged"] = str(getattr(r, "not_judged", "") or "")
        else:
            d = dict(r)
        return kind, {"result": finite_json(d)}
    if kind == "done":
        res = data.get("result")
        if res is not None and not isinstance(res, Mapping):
            return kind, {"report": to_json_dict(res)}
        return kind, {"report": finite_json(dict(data.get("report") or {}))}
    return kind, finite_json(dict(data))
