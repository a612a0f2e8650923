"""Rendering of a check run: the contract's JSON, and a readable text report.

JSON shape (``kws check --json``, task format v1)::

    {"task", "task_tree", "device", "complete", "versions", "seeds", "findings", "checks"}

plus kws extensions: ``title``, ``seconds``, ``warnings`` (task-file warnings), the keys
checks add through :meth:`~workstation.engine.context.CheckContext.extend_report`
(``profile``: what ran, from the ``profile`` and ``profile-attached`` checks),
``sandbox`` (``"bwrap"``: task code ran in kws's bubblewrap sandbox; ``"none"``: it ran
unconfined, the reviewer opted out), ``isolation`` (notes on it: the memory cap, an
inherited limit lower than kws's, the out-of-process check being off), ``not_judged``
(``[{"check", "reason"}]``, a contract key: the checks that could not look, wholly or in a
part that could have failed — an ``error``, a step killed at a limit, an import that
failed, a missing tool or extra, a backend that cannot run here — as opposed to a ``skip``
with nothing to look at, such as a task with no bench; such a check is never ``pass``),
``runner_failed`` (kws's own runner failed: exit code 3),
``plugins`` (``[{"entry_point", "value", "distribution", "version", "checks"}]``: each
``kws.checks`` entry point that loaded and the check ids it registered) and
``plugin_errors`` (``[{"entry_point", "value", "distribution", "version", "error"}]``: each
one that failed to load; its checks are not in the run) and ``disagreements`` (``[{"kind",
"signal": {"check", "severity", "summary"}, "says", "against": [{"check", "status", "says"}],
"summary"}]``: a check carried a hack-class signal while a check that judges that property
said ``pass``, or a static reading the run did not bear out; :mod:`workstation.engine.suspicion`).
Non-finite numbers anywhere in the evidence are written as the strings "nan", "inf",
"-inf". ``complete`` counts the checks that apply only: it is true when every check that
applies was judged, false when any check ended in ``error``, is listed under ``not_judged``
or kws's runner failed; a ``skip`` with nothing to look at (no bench, no claim, another
backend's check) leaves it true.

Exit codes (:func:`exit_code`, fail-closed): 0 every check was judged, none failed and no
suspicion is left open, 1 a ``fail`` finding, 2 the task did not load (``kws check`` itself),
3 kws's runner failed, 4 no ``fail`` but a check was not judged or ended in ``error``, a
finding tagged with a hack-class suspicion was not confirmed, or two checks disagree
(:mod:`workstation.engine.suspicion`: one rule for suspicion): not a verdict.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from workstation import __version__
from workstation.engine.check import plugin_report
from workstation.engine.suspicion import disagreements, unconfirmed
from workstation.schema.text import safe_text, safe_tree

if TYPE_CHECKING:
    from workstation.engine.run import EngineResult

_SEV_MARK = {"fail": "FAIL", "warn": "WARN", "info": "info"}
_STATUS_MARK = {"pass": "pass", "fail": "FAIL", "warn": "WARN", "skip": "skip", "error": "ERROR"}


def json_scalar(v: Any) -> Any:
    """One evidence value as plain JSON: a numpy scalar becomes its Python value, a
    non-finite float the string "nan" / "inf" / "-inf" (task format v1, "kws check --json"),
    a complex number its text (``"(1+2j)"``; JSON has no complex)."""
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, complex):
        return str(v)
    return finite_json(v) if isinstance(v, float) else v


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by "nan" / "inf" / "-inf"."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def to_json_dict(res: EngineResult) -> dict[str, Any]:
    """The contract's report object for an engine run."""
    versions = {"kws": __version__, **{k: v for k, v in res.versions.items() if k != "kws"}}
    # the installed libraries the candidate (and its task files) import: a library kernel's
    # verdict is a verdict on that version
    from workstation.task.sources import TaskSources, installed_versions

    files = [ep.file for role, ep in res.task.entry.items() if role == "candidate"]
    for k, v in installed_versions(TaskSources(res.task.dir), files).items():
        versions.setdefault(k, v)
    doc = {
        "task": res.task.id,
        "task_tree": res.task_tree,
        "device": res.device,
        "complete": not res.runner_failed and all(r.status != "error" and not r.not_judged for r in res.results),
        "versions": versions,
        "seeds": list(res.seeds),
        "findings": [f.as_dict() for f in res.findings],
        "checks": [r.as_dict() for r in res.results],
        "title": res.task.title,
        "seconds": round(res.seconds, 3),
        "warnings": [str(w) for w in res.task.warnings],
        "sandbox": res.sandbox,
        "isolation": list(res.notes),
        "not_judged": [{"check": r.check, "reason": r.not_judged} for r in res.results if r.not_judged],
        "runner_failed": res.runner_failed,
        **plugin_report(),
    }
    doc["disagreements"] = disagreements([f.as_dict() for f in res.findings], [r.as_dict() for r in res.results],
                                         res.task.backend)
    for key, value in res.extensions.items():
        doc.setdefault(key, value)  # never over a contract key
    # task-derived text (titles, reasons, evidence, exception texts) enters the report here:
    # escaped and cut once, so the JSON, the text report and a verdict hold safe text
    return safe_tree(finite_json(doc))


def dumps(doc: dict[str, Any]) -> str:
    """JSON text of a report (strict JSON: no NaN literals)."""
    return json.dumps(finite_json(doc), indent=2, allow_nan=False)


#: the exit codes of ``kws check`` (task format v1, "kws check --json"; fail-closed).
EXIT_OK, EXIT_FAIL, EXIT_LOAD, EXIT_KWS, EXIT_NOT_JUDGED = 0, 1, 2, 3, 4


def not_judged_of(doc: dict[str, Any]) -> list[dict[str, str]]:
    """The report's checks that could not look, as ``[{"check", "reason"}]``: its
    ``not_judged`` list plus every check that ended in ``error`` and is not on it (a report
    written by an older kws may lack the key), plus every check with a non-``fail`` finding
    tagged with a hack-class suspicion it did not confirm
    (:func:`workstation.engine.suspicion.unconfirmed`)."""
    out = [dict(n) for n in doc.get("not_judged") or []]
    seen = {n.get("check") for n in out}
    for c in doc.get("checks", []):
        if c.get("status") == "error" and c.get("check") not in seen:
            out.append({"check": c["check"], "reason": f"kws error: {(c.get('reason') or '').splitlines()[0][:300]}"
                        if c.get("reason") else "kws error"})
    seen |= {n["check"] for n in out}
    out += unconfirmed(doc.get("findings") or [], {str(c) for c in seen})
    return out


def exit_code(doc: dict[str, Any]) -> int:
    """The exit code of a report (fail-closed): 1 when a finding has severity ``fail``;
    else 3 when kws's runner failed; else 4 when a check that applies was not judged or
    ended in ``error``, or left a hack-class suspicion unconfirmed (:func:`not_judged_of`),
    or two checks disagree (``disagreements``): "no fail" is then not a verdict; else 0.
    2 (the task did not load) is :mod:`workstation.cli.check`'s."""
    if any(f["severity"] == "fail" for f in doc["findings"]):
        return EXIT_FAIL
    if doc.get("runner_failed"):
        return EXIT_KWS
    if not_judged_of(doc) or doc.get("disagreements"):
        return EXIT_NOT_JUDGED
    return EXIT_OK


def plugin_text(p: dict[str, Any]) -> str:
    """A ``plugins`` / ``plugin_errors`` entry of the report as words: ``entry point 'team'
    (team_checks) of team-checks 1.0``."""
    dist = f"{p.get('distribution') or ''} {p.get('version') or ''}".strip() or "an unknown distribution"
    return f"entry point {p.get('entry_point')!r} ({p.get('value')}) of {dist}"


def to_text(doc: dict[str, Any], *, verbose: bool = False) -> str:
    """A readable report: one line per check, then each finding with its repro; control
    characters and escape sequences shown escaped (:func:`workstation.schema.text.safe_text`),
    also for a report ``doc`` read back from a file."""
    lines = [
        f"kws check: {doc['task']} — {doc.get('title', '')}",
        f"device: {doc['device']}   seeds: {doc['seeds']}   tree: {doc.get('task_tree') or '-'}"
        f"   kws {doc['versions'].get('kws')}   sandbox: {doc.get('sandbox', '?')}",
    ]
    if doc.get("sandbox") == "none":
        lines.append("warning: SANDBOX OFF: task code ran unconfined, as you (--no-sandbox / sandbox = \"none\")")
    for w in doc.get("warnings", []):
        lines.append(f"warning: {w}")
    for n in doc.get("isolation", []):
        lines.append(f"isolation: {n}")
    standin = doc.get("device_standin") or {}
    if standin.get("called"):
        # the device queries task code made without a GPU, answered as the declared target
        lines.append(f"device stand-in: answered as {standin.get('target')} "
                     f"({(standin.get('answers') or {}).get('name', '?')}): "
                     + ", ".join(f"{p} x{v.get('calls')}" for p, v in sorted(standin["called"].items())))
    emu = doc.get("cuda_emulation") or {}
    if emu.get("builds"):
        # the CUDA candidate ran on the CPU under kws's emulation (docs/backends.md, "CUDA on a CPU")
        lines.append("cuda emulation: " + ", ".join(sorted(emu["builds"])) + ": " + str(emu.get("emulated", "")))
    for p in doc.get("plugin_errors", []):
        lines.append(f"plugin error: {plugin_text(p)} failed to load: {p.get('error', '')}; its checks did not run")
    for p in doc.get("plugins", []):
        lines.append(f"plugin: {plugin_text(p)}: {', '.join(p.get('checks') or []) or 'no check'}")
    lines.append("")
    for c in doc["checks"]:
        reason = f"  ({c['reason'].splitlines()[0]})" if c.get("reason") else ""
        lines.append(f"  {_STATUS_MARK.get(c['status'], c['status']):5}  {c['check']:<18} {c['seconds']:7.2f}s{reason}")
    shown = [f for f in doc["findings"] if verbose or f["severity"] != "info"]
    if shown:
        lines.append("")
        lines.append("findings:")
    for f in shown:
        lines.append(f"  [{_SEV_MARK[f['severity']]}] {f['check']}: {f['summary']}")
        if f.get("repro"):
            lines.append(f"         repro: {f['repro']}")
    n_fail = sum(f["severity"] == "fail" for f in doc["findings"])
    n_warn = sum(f["severity"] == "warn" for f in doc["findings"])
    lines.append("")
    verdict = "does not hold up" if n_fail else ("needs a look" if n_warn else "no fail finding")
    nj = not_judged_of(doc)
    if doc["complete"]:
        n_skip = sum(c["status"] == "skip" for c in doc["checks"])
        complete = " (complete: every check that applies was judged" + (
            f"; {n_skip} had nothing to look at)" if n_skip else ")")
    else:
        complete = f" (incomplete: {', '.join(n['check'] for n in nj) or 'the runner failed'} could not look)"
    lines.append(f"{n_fail} fail, {n_warn} warn: {verdict}{complete}")
    for n in nj:
        lines.append(f"  not judged: {n['check']}: {_first_line(n['reason'])}")
    dis = doc.get("disagreements") or []
    for d in dis:
        lines.append(f"  disagreement: {_first_line(d.get('summary', ''), 300)}")
    if doc.get("runner_failed"):
        lines.append("kws's own runner failed: the run is not a verdict (exit 3)")
    if nj or (dis and not n_fail):
        parts = []
        if nj:
            parts.append(f"{len(nj)} check{'s' if len(nj) != 1 else ''} could not look ("
                         + "; ".join(f"{n['check']}: {_first_line(n['reason'], 120)}" for n in nj) + ")")
        if dis:
            parts.append(f"{len(dis)} disagreement{'s' if len(dis) != 1 else ''} between checks ("
                         + "; ".join(_first_line(d.get("summary", ""), 120) for d in dis) + ")")
        lines.append("not a verdict: " + "; ".join(parts))
    return safe_text("\n".join(lines), None)


def _first_line(text: str, limit: int = 200) -> str:
    lines = (text or "").splitlines()
    return lines[0][:limit] if lines else ""
