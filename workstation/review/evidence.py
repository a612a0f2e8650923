"""A finding as text: its evidence as labelled lines for the evidence pane
(:func:`evidence_lines`), the task code line it concerns (:func:`finding_source`),
rationale lines citing findings (:func:`rationale_from_findings`), and findings in the
order every view shows them (:func:`worst_first`).

Findings are the contract's finding dicts (``kws check --json``). Pure Python.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["SEVERITY_RANK", "case_text", "evidence_lines", "figure_parts", "finding_source",
           "rationale_from_findings", "severity_rank", "worst_first"]

#: findings worst first: fail, warn, info (anything else after).
SEVERITY_RANK = {"fail": 0, "warn": 1, "info": 2}

F = TypeVar("F", bound=Mapping[str, Any])


def case_text(case: Any) -> str:
    """A case as one line (``"M=64 N=1000 float16"``, the engine's
    :func:`~workstation.engine.context.case_label`); anything but a table as itself."""
    if not isinstance(case, Mapping):
        return str(case)
    # deferred: the engine's context module loads numpy, which the app's first paint must
    # not wait for; by the time a finding is shown the rubric's check registry has loaded it
    from workstation.engine.context import case_label

    return case_label(dict(case))


def _num(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_num(x) for x in v) + "]"
    return str(v)


def _compact(v: Any, limit: int = 400) -> str:
    if isinstance(v, str):
        s = v
    elif isinstance(v, int | float | bool):
        s = _num(v)
    else:
        s = json.dumps(v, sort_keys=False, default=str)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def finding_source(f: Mapping[str, Any]) -> tuple[str, int] | None:
    """The task code line a finding concerns, as ``(file, line)`` (1-based, file relative
    to the task folder): ``evidence["source"]``, else ``evidence["where"]`` (the task
    frame an exception was raised from); None when neither names one."""
    ev = f.get("evidence") or {}
    for key in ("source", "where"):
        src = ev.get(key)
        if isinstance(src, Mapping):
            file, line = src.get("file"), src.get("line")
            if isinstance(file, str) and file and isinstance(line, int) and not isinstance(line, bool) and line > 0:
                return file, line
    return None


#: evidence keys shown first, with their labels; the rest follow in their own order.
_EVIDENCE_ORDER = (
    ("case", "case"), ("seed", "seed"), ("shape", "shape"), ("dtype", "dtype"),
    ("elements", "elements"), ("mismatched", "mismatched"), ("max_abs_err", "max abs err"),
    ("max_rel_err", "max rel err"), ("max_ulp", "max ULP"), ("headroom_used", "of allowed error"),
)


def evidence_lines(f: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A finding as ``(label, text)`` lines for the evidence pane: severity and check,
    summary, case, seed, element counts, errors, the worst element (index, expected vs got,
    allowed), tolerance, derivation, exception or death, source line, any other evidence,
    and the repro command."""
    ev = dict(f.get("evidence") or {})
    out: list[tuple[str, str]] = [
        ("finding", f"{f.get('severity', '?')} · {f.get('check', '?')}"),
        ("summary", str(f.get("summary", ""))),
    ]
    out += _ordered_lines(ev)
    out += _worst_lines(ev.pop("worst", None))
    out += _tolerance_lines(ev.pop("tolerance", None))
    if "derivation" in ev:
        out.append(("derivation", _compact(ev.pop("derivation"), 2000)))
    for key, label in (("type", "exception"), ("message", "message"), ("death", "death"),
                       ("status", "status"), ("signal", "signal"), ("where", "where")):
        if key in ev:
            out.append((label, _compact(ev.pop(key))))
    for key in ("traceback_tail", "stderr_tail"):
        if key in ev:
            out.append((key.replace("_", " "), str(ev.pop(key))))
    source = finding_source(f)
    ev.pop("source", None)
    if source is not None:
        out.append(("source", f"{source[0]}:{source[1]}"))
    ev.pop("timing", None)  # the timing panel shows it
    for k, v in ev.items():
        out.append((k.replace("_", " "), _compact(v)))
    if f.get("repro"):
        out.append(("repro", str(f["repro"])))
    return out


def _ordered_lines(ev: dict[str, Any]) -> list[tuple[str, str]]:
    """The lines of the :data:`_EVIDENCE_ORDER` keys of ``ev`` (popped from it), in that order."""
    out: list[tuple[str, str]] = []
    for key, label in _EVIDENCE_ORDER:
        if key in ev:
            v = ev.pop(key)
            if key == "case":
                out.append((label, case_text(v)))
            elif key == "headroom_used" and isinstance(v, int | float):
                out.append((label, f"{100 * v:.3g}%"))
            else:
                out.append((label, _num(v)))
    return out


def _worst_lines(worst: Any) -> list[tuple[str, str]]:
    """The worst element's lines (index, expected and got, its errors and allowance);
    none unless ``worst`` is a table."""
    if not isinstance(worst, Mapping):
        return []
    out: list[tuple[str, str]] = []
    if "index" in worst:
        out.append(("worst at", _num(worst["index"])))
    if "expected" in worst or "got" in worst:
        out.append(("expected", _num(worst.get("expected"))))
        out.append(("got", _num(worst.get("got"))))
    out += [(k.replace("_", " "), _num(worst[k])) for k in ("abs_err", "rel_err", "ulp", "allowed") if k in worst]
    return out


def _tolerance_lines(tol: Any) -> list[tuple[str, str]]:
    """The tolerance line: a table's set values and its source, anything else compacted;
    none for None."""
    if isinstance(tol, Mapping):
        parts = [f"{k}={_num(v)}" for k, v in tol.items() if v is not None and k not in ("source",)]
        src = f" ({tol['source']})" if tol.get("source") else ""
        return [("tolerance", " ".join(parts) + src)]
    return [] if tol is None else [("tolerance", _compact(tol))]


def figure_parts(*figures: tuple[str, object]) -> list[str]:
    """The texts of the figures that are known: each ``(pattern, value)`` as
    ``pattern.format(value)`` (``"median {:.3g}"``, ``"IQR {0[0]:.3g}-{0[1]:.3g}"``), in
    order, leaving out those whose value is None."""
    return [pattern.format(value) for pattern, value in figures if value is not None]


def severity_rank(finding: Mapping[str, Any]) -> int:
    """The sort key of "worst first": 0 ``fail``, 1 ``warn``, 2 ``info``, 3 anything else."""
    return SEVERITY_RANK.get(str(finding.get("severity")), 3)


def worst_first(findings: Iterable[F]) -> list[F]:
    """``findings`` sorted worst first (:func:`severity_rank`; stable within a severity)."""
    return sorted(findings, key=severity_rank)


def rationale_from_findings(findings: Sequence[Mapping[str, Any]]) -> str:
    """Rationale lines citing findings: ``- <check> (<severity>): <summary> [case ...,
    seed ...]``, one per finding, worst first."""
    lines = []
    for f in worst_first(findings):
        ev = f.get("evidence") or {}
        where = []
        if isinstance(ev.get("case"), Mapping):
            where.append(f"case {case_text(ev['case'])}")
        if "seed" in ev:
            where.append(f"seed {ev['seed']}")
        tail = f" [{', '.join(where)}]" if where else ""
        lines.append(f"- {f.get('check')} ({f.get('severity')}): {f.get('summary', '')}{tail}")
    return "\n".join(lines)
