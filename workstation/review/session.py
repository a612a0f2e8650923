"""The review session: one reviewer judging one task. Pure Python, no Textual.

The TUI displays a :class:`ReviewSession` and dispatches keys to it:

- the **checks table** (:class:`CheckRow`) fills in as a check source's events arrive
  (:mod:`workstation.review.sources`), and the session keeps a report in the shape of
  ``kws check --json`` (task format v1) for the rubric's suggestions
  (:func:`workstation.rubric.model.suggest`) and the verdict; the ``start`` event's
  ``timing_checks`` / ``timing_evidence_checks`` say which checks the timing panel and
  "re-run timing" concern;
- the **rubric values** with one-key picks (the nth value of a field), accept-the-suggestion,
  undo and redo, the rationale and its prefill from findings
  (:mod:`workstation.review.evidence`), validation, the draft (autosaved by
  :class:`~workstation.review.autosave.DraftSaver` after every change the reviewer makes;
  opening a task and watching its checks writes nothing), and the commit
  (:func:`workstation.records.store.commit_verdict`);
- the **provenance** of each accepted suggestion (:data:`~workstation.records.model.PROVENANCES`:
  from a complete run, an incomplete or errored one, or a pre-screen), the fields whose
  suggestion changed after the reviewer accepted it (:attr:`ReviewSession.reflagged`), and
  what a commit should confirm first (:meth:`ReviewSession.commit_warnings`: checks still
  running or errored, re-flagged fields).

Nothing here imports torch or triton: the engine runs task code in child processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.records.drafts import Draft
from workstation.review.evidence import rationale_from_findings, worst_first
from workstation.rubric.model import Rubric, validate_values
from workstation.rubric.suggest import Suggestion, suggest

__all__ = ["RUNNING_STATES", "Change", "CheckRow", "ReviewSession"]

#: provenance of an accepted suggestion (the verdict's ``suggested`` table).
FROM_COMPLETE, FROM_INCOMPLETE, FROM_PRESCREEN = "from-complete-run", "from-incomplete-run", "from-prescreen"

#: check-row states before a result: waiting for a slot, running now.
RUNNING_STATES = ("queued", "running")


@dataclass
class CheckRow:
    """One check in the checks table. ``status``: ``queued`` / ``running`` until its
    result arrives, then the contract's pass / warn / fail / skip / error. ``seconds`` is
    the check's wall time (None until it finishes); ``started`` the monotonic time it
    started (for a live clock). ``not_judged``: see the attribute."""

    check: str
    status: str = "queued"
    seconds: float | None = None
    reason: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    started: float | None = None
    #: why the check could not look, wholly or in part ("" when it looked; the report's
    #: ``not_judged``); an ``error`` row counts as not judged too (:attr:`unjudged`).
    not_judged: str = ""

    @property
    def unjudged(self) -> str:
        """Why this finished check was not judged ("" when it was): its ``not_judged``
        reason, or its error."""
        if self.not_judged:
            return self.not_judged
        if self.status == "error":
            return (self.reason.strip().splitlines() or ["kws error"])[0]
        return ""

    @property
    def done(self) -> bool:
        return self.status not in RUNNING_STATES

    def as_check(self) -> dict[str, Any]:
        """The contract's ``checks`` entry."""
        return {"check": self.check, "status": self.status,
                "seconds": round(self.seconds or 0.0, 3), "reason": self.reason}


Change = tuple[str, str | None, str | None]


class ReviewSession:
    """The state of one review: checks (live), rubric values, undo/redo, the draft.

    ``values`` maps rubric field keys to values (the rationale under
    ``rubric.rationale_field``). Every method that changes ``values`` returns what changed
    and calls ``on_change`` (the TUI hooks autosave there).

    ``timing_checks`` are the ids of the run's timing checks and ``timing_evidence_checks``
    those whose findings carry the timing panel's evidence, as the engine's ``start``
    event names them (a re-run of some checks adds to what the full run named).

    ``source`` says where the rows came from: ``"run"`` (a live check run, the default) or
    ``"prescreen"`` (a report stored by an earlier screening run: replayed by the check
    source with the ``start`` event's ``prescreen`` table, or given to :meth:`load_prescreen`).
    ``prescreen`` is that table when the checks shown came from ``kws screen``'s stored notes:
    ``{"finished", "host", "backend", "key", "timing"}``; None after a fresh run.
    ``suggested`` maps each field whose value was taken from kws's suggestion to its
    provenance; ``reflagged`` maps each such field whose suggestion changed afterwards to
    a sentence saying how. ``touched`` is true once the reviewer changed something (or a
    draft was restored): only then is there a draft to save.
    """

    def __init__(self, task_id: str, queue_root: Path | str, rubric: Rubric, *,
                 draft: Draft | None = None, on_change: Callable[[ReviewSession], None] | None = None) -> None:
        self.task_id = task_id
        self.queue_root = Path(queue_root)
        self.rubric = rubric
        self.values: dict[str, str] = {}
        self.rows: dict[str, CheckRow] = {}
        self.device = ""
        self.timing_checks: list[str] = []
        self.timing_evidence_checks: list[str] = []
        self.versions: dict[str, str] = {}
        self.seeds: list[int] = []
        self.report_tree: str | None = None
        #: ``kws.checks`` plugins that failed to load in the run's process (the report's
        #: ``plugin_errors``: entry_point, value, distribution, version, error).
        self.plugin_errors: list[dict[str, Any]] = []
        self.task_tree: str | None = None
        self.final_report: dict[str, Any] | None = None
        self.error: str = ""
        self.run_started: float | None = None
        self.run_seconds: float | None = None
        self.prescreen: dict[str, Any] | None = None
        self.on_change = on_change
        self._partial = False  # the current run re-runs some checks only
        self._undo: list[tuple[list[Change], Any, Any]] = []
        self._redo: list[tuple[list[Change], Any, Any]] = []
        self._version = 0  # bumped by every check event (see suggestions())
        self._suggested: tuple[int, dict[str, Suggestion]] | None = None
        self.source = "run"
        self.suggested: dict[str, str] = {}
        self.reflagged: dict[str, str] = {}
        # field -> (value accepted, fail/warn findings behind the suggestion then; None: unknown)
        self._accepted: dict[str, tuple[str, tuple[Any, ...] | None]] = {}
        self.touched = False
        #: the report of the draft's finished run (None: no draft, no report, or a check had
        #: not finished): shown again on reopen when it is still this task version's
        #: (:meth:`load_stored`, :func:`workstation.review.services.reuse_refusal`)
        self.stored_report: dict[str, Any] | None = None
        self.stored_at = draft.updated if draft is not None else None
        if draft is not None and draft.report and not draft.unfinished_checks:
            self.stored_report = dict(draft.report)
        #: the task version the saved draft's values were entered on (None: no draft with
        #: values, or no version known): :meth:`outdated_draft` compares it with HEAD's
        self.draft_tree: str | None = draft.task_tree if draft is not None and draft.values else None
        if draft is not None:
            self.values = {k: v for k, v in draft.values.items() if rubric.field(k) is not None}
            self.task_tree = draft.task_tree
            self.suggested = {k: v for k, v in draft.suggested.items() if self.values.get(k)}
            self._accepted = {k: (self.values[k], None) for k in self.suggested}
            self.touched = True

    # ---- checks --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(not r.done for r in self.rows.values())

    def begin_run(self, only: Iterable[str] | None = None) -> None:
        """Mark a run as started: with ``only``, those rows go back to queued; otherwise
        the table is cleared until the ``start`` event lists the checks."""
        self._version += 1
        self._partial = bool(only)
        self.source = "run"
        self.error = ""
        self.run_started = time.monotonic()
        self.run_seconds = None
        if only:
            for cid in only:
                self.rows[cid] = CheckRow(cid)
        else:
            self.rows = {}
            self.final_report = None

    def apply_event(self, kind: str, data: Mapping[str, Any]) -> str | None:
        """Apply one normalised event; returns the check id it concerns (or None). After a
        result (or the run's end or error) the accepted suggestions are checked again
        (:attr:`reflagged`)."""
        cid = self._apply_event(kind, data)
        if kind in ("check_finished", "done", "error"):
            self._recheck_accepted()
        return cid

    def load_prescreen(self, report: Mapping[str, Any]) -> None:
        """Show a stored report (``kws check --json``'s shape, from a screening run of this
        task version) as the session's rows; suggestions taken from it are
        ``from-prescreen`` until a live run replaces it (:meth:`begin_run`)."""
        self._load_report(report, "prescreen")

    def load_stored(self) -> None:
        """Show :attr:`stored_report` (this reviewer's own finished run of this task version,
        kept in the draft) as the session's rows instead of running the battery again:
        ``source`` is ``stored``; its suggestions count as from a complete run where every
        informing check finished, as they did. A re-run (``R``) replaces it."""
        if self.stored_report is not None:
            self._load_report(self.stored_report, "stored")

    def _load_report(self, report: Mapping[str, Any], source: str) -> None:
        self._version += 1
        self.rows = {}
        by_check: dict[str, list[dict[str, Any]]] = {}
        for f in report.get("findings") or []:
            by_check.setdefault(str(f.get("check")), []).append(dict(f))
        unjudged = {str(n.get("check")): str(n.get("reason") or "could not look")
                    for n in report.get("not_judged") or [] if isinstance(n, Mapping)}
        for c in report.get("checks") or []:
            cid = str(c.get("check"))
            self.rows[cid] = CheckRow(cid, str(c.get("status")), float(c.get("seconds") or 0.0),
                                      str(c.get("reason") or ""), by_check.get(cid, []),
                                      not_judged=unjudged.get(cid, ""))
        self.device = str(report.get("device") or "")
        self.versions = dict(report.get("versions") or {})
        self.seeds = list(report.get("seeds") or [])
        self.report_tree = report.get("task_tree")
        self.plugin_errors = [dict(p) for p in report.get("plugin_errors") or [] if isinstance(p, Mapping)]
        self.final_report = self.report()
        self.source = source
        self._recheck_accepted()

    def _apply_event(self, kind: str, data: Mapping[str, Any]) -> str | None:
        self._version += 1
        if kind == "start":
            self._started(data)
        elif kind == "check_started":
            cid = data["check"]
            row = self.rows.setdefault(cid, CheckRow(cid))
            row.status, row.started = "running", time.monotonic()
            return cid
        elif kind == "check_finished":
            r = data["result"]
            cid = r["check"]
            self.rows[cid] = CheckRow(cid, r["status"], float(r.get("seconds") or 0.0), r.get("reason") or "",
                                      list(r.get("findings") or []), not_judged=str(r.get("not_judged") or ""))
            return cid
        elif kind == "done":
            self._done(dict(data.get("report") or {}))
        elif kind == "error":
            self.error = str(data.get("message") or "the check run failed")
            for row in self.rows.values():
                if not row.done:
                    row.status, row.reason = "error", self.error
        return None

    def _started(self, data: Mapping[str, Any]) -> None:
        """A run's ``start`` event: its checks (queued rows), device and timing checks."""
        if not self._partial:
            self.prescreen = dict(data["prescreen"]) if isinstance(data.get("prescreen"), Mapping) else None
            self.source = "prescreen" if self.prescreen is not None else "run"
        self.device = str(data.get("device") or "")
        timing = [str(c) for c in data.get("timing_checks") or []]
        evidence = [str(c) for c in data.get("timing_evidence_checks") or []]
        if self._partial:  # a re-run names only its own checks: keep the full run's
            timing = _union(self.timing_checks, timing)
            evidence = _union(self.timing_evidence_checks, evidence)
        self.timing_checks, self.timing_evidence_checks = timing, evidence
        for cid in data.get("checks") or []:
            self.rows[cid] = CheckRow(cid)

    def _done(self, rep: dict[str, Any]) -> None:
        """A run's ``done`` event with its report ``rep``: the run's facts, the rows the
        report finishes (a partial run merges into them), and the final report rebuilt."""
        self.device = rep.get("device") or self.device
        self.versions = dict(rep.get("versions") or {})
        self.seeds = list(rep.get("seeds") or [])
        self.report_tree = rep.get("task_tree")
        self.plugin_errors = [dict(p) for p in rep.get("plugin_errors") or [] if isinstance(p, Mapping)]
        secs = rep.get("seconds")  # the engine's own wall time (kws extension of the report)
        if isinstance(secs, int | float):
            self.run_seconds = float(secs)
        elif self.run_started:
            self.run_seconds = time.monotonic() - self.run_started
        for c in rep.get("checks") or []:
            row = self.rows.get(c["check"])
            if row is not None and not row.done:
                row.status, row.seconds, row.reason = c["status"], c.get("seconds"), c.get("reason") or ""
        for n in rep.get("not_judged") or []:
            row = self.rows.get(str(n.get("check"))) if isinstance(n, Mapping) else None
            if row is not None and row.done and not row.not_judged:
                row.not_judged = str(n.get("reason") or "could not look")
        self.final_report = self.report()
        return None

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding so far, in check order, worst first within a check."""
        out = []
        for row in self.rows.values():
            out.extend(worst_first(row.findings))
        return out

    def timing_findings(self) -> list[dict[str, Any]]:
        """The findings of the timing-evidence checks so far (see ``timing_evidence_checks``)."""
        return [f for cid in self.timing_evidence_checks if (row := self.rows.get(cid)) is not None
                for f in worst_first(row.findings)]

    def report(self) -> dict[str, Any]:
        """The checks so far in the shape of ``kws check --json`` (task format v1), with its
        ``not_judged`` (every finished check that could not look, an ``error`` included).
        ``complete`` counts the checks that apply only (as ``kws check``'s): false while a
        check is queued or running, or when one ended in error or was not judged; a skip
        with nothing to look at leaves it true."""
        done = [r for r in self.rows.values() if r.done]
        complete = bool(self.rows) and len(done) == len(self.rows) and all(
            r.status != "error" and not r.not_judged for r in done)
        return {
            "task": self.task_id,
            "task_tree": self.report_tree,
            "device": self.device,
            "complete": complete,
            "versions": dict(self.versions),
            "seeds": list(self.seeds),
            "findings": [f for r in done for f in r.findings],
            "checks": [r.as_check() for r in done],
            "not_judged": [{"check": r.check, "reason": r.unjudged} for r in done if r.unjudged],
        }

    def plugin_notice(self) -> str:
        """One line naming the ``kws.checks`` plugins that failed to load in the run's
        process, so their checks' absence is not silent ("" when none failed): e.g.
        ``⚠ check plugin 'team' (team-checks 1.0) failed to load: ImportError: ...``."""
        if not self.plugin_errors:
            return ""
        named = []
        for p in self.plugin_errors:
            dist = f"{p.get('distribution') or ''} {p.get('version') or ''}".strip() or "unknown distribution"
            named.append(f"{p.get('entry_point')!r} ({dist}): {p.get('error') or 'unknown error'}")
        noun = "check plugin" if len(named) == 1 else f"{len(named)} check plugins"
        return f"⚠ {noun} failed to load: " + "; ".join(named)

    def counts(self) -> dict[str, int]:
        """How many checks are in each status."""
        out: dict[str, int] = {}
        for r in self.rows.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out

    # ---- rubric values -------------------------------------------------------------------

    def suggestions(self) -> dict[str, Suggestion]:
        """kws's suggestion per choice field from the findings so far (recomputed only
        when a check event changed the report: the rubric form asks on every repaint)."""
        if self._suggested is None or self._suggested[0] != self._version:
            rep = self.report()
            self._suggested = (self._version, suggest(self.rubric, rep["findings"], rep["checks"], rep["not_judged"]))
        return self._suggested[1]

    @property
    def rationale(self) -> str:
        return self.values.get(self.rubric.rationale_field, "")

    # ---- provenance of suggestions -------------------------------------------------------

    def informing_rows(self, key: str) -> list[CheckRow]:
        """The rows of the checks that inform field ``key`` (its ``informed_by``) in this
        run, in the rubric's order."""
        f = self.rubric.field(key)
        return [r for c in (f.informed_by if f is not None else ()) if (r := self.rows.get(c)) is not None]

    def provenance(self, key: str) -> str:
        """Where kws's current suggestion for ``key`` comes from: ``from-prescreen`` (a
        stored report), ``from-incomplete-run`` (no check has reported yet, the run
        failed, or an informing check is queued, running or ended in error) or
        ``from-complete-run``."""
        if self.source == "prescreen":
            return FROM_PRESCREEN
        if not self.rows or self.error:
            return FROM_INCOMPLETE
        if any(not r.done or r.status == "error" for r in self.informing_rows(key)):
            return FROM_INCOMPLETE
        return FROM_COMPLETE

    def _signature(self, key: str) -> tuple[Any, ...]:
        """The fail and warn findings behind the suggestion for ``key`` (check, severity,
        summary), sorted: what a re-flag compares."""
        s = self.suggestions().get(key)
        if s is None:
            return ()
        return tuple(sorted((str(f.get("check")), str(f.get("severity")), str(f.get("summary")))
                            for f in s.findings if f.get("severity") in ("fail", "warn")))

    def _note_accepted(self, key: str, value: str) -> None:
        self.suggested[key] = self.provenance(key)
        self._accepted[key] = (value, self._signature(key))
        self.reflagged.pop(key, None)

    def _forget_accepted(self, key: str) -> None:
        self.suggested.pop(key, None)
        self._accepted.pop(key, None)
        self.reflagged.pop(key, None)

    def _recheck_accepted(self) -> None:
        """After new results: a field whose accepted suggestion changed (another value, or
        other fail/warn findings behind it) is re-flagged; one accepted from an incomplete
        run whose informing checks have now finished with the same suggestion becomes
        ``from-complete-run``."""
        if not self._accepted:
            return
        sugg = self.suggestions()
        for key, (value, sig) in list(self._accepted.items()):
            if self.values.get(key) != value:
                self._forget_accepted(key)
                continue
            sg = sugg.get(key)
            now = sg.value if sg is not None else None
            if now != value:
                self.reflagged[key] = (f"kws's suggestion changed after you accepted {value}: now "
                                       f"{now or 'none'}" + (f" ({sg.reason})" if sg is not None and sg.reason else ""))
            elif sig is not None and self._signature(key) != sig:
                self.reflagged[key] = (f"the findings behind {value} changed after you accepted it"
                                       + (f" ({sg.reason})" if sg is not None and sg.reason else ""))
            elif key not in self.reflagged and self.provenance(key) == FROM_COMPLETE \
                    and self.suggested.get(key) == FROM_INCOMPLETE:
                self.suggested[key] = FROM_COMPLETE

    def unfinished_checks(self) -> list[str]:
        """The checks of the run without a result yet (queued or running), in run order."""
        return [c for c, r in self.rows.items() if not r.done]

    def commit_warnings(self) -> list[str]:
        """Why a commit now needs the reviewer's explicit confirmation (empty: it does
        not): no check result yet, the run failed, checks still queued or running (those
        that inform a field named first), checks that ended in error or could not look
        (``not_judged``: the same confirmation as a half-run battery), fields whose accepted
        suggestion changed (:attr:`reflagged`), suggestions taken from a pre-screen."""
        out: list[str] = []
        informing = {c for f in self.rubric.choice_fields for c in f.informed_by}
        if not self.rows:
            out.append("no check has reported yet" + (f" ({self.error})" if self.error else ""))
        elif self.error:
            out.append(f"the check run failed: {self.error}")
        left = self.unfinished_checks()
        if left:
            inf = [c for c in left if c in informing]
            rest = [c for c in left if c not in informing]
            parts = []
            if inf:
                parts.append(f"{len(inf)} check(s) that inform the rubric: {', '.join(inf)}")
            if rest:
                parts.append(f"{len(rest)} other(s): {', '.join(rest)}")
            out.append("not finished: " + "; ".join(parts))
        errored = [c for c, r in self.rows.items() if r.status == "error" and c not in left]
        if errored and not self.error:
            out.append(f"ended in error: {', '.join(errored)}")
        unjudged = [(c, r.not_judged) for c, r in self.rows.items() if r.not_judged and r.status != "error"]
        if unjudged:  # "no fail" from these checks is not a verdict
            out.append(f"{len(unjudged)} check(s) could not look: " + "; ".join(
                f"{c} ({(why.splitlines() or [''])[0][:120]})" for c, why in unjudged))
        for key, why in self.reflagged.items():
            f = self.rubric.field(key)
            out.append(f"{f.label if f else key}: {why}")
        pre = [k for k, v in self.suggested.items() if v == FROM_PRESCREEN]
        if pre:
            out.append("taken from a pre-screen (not this session's run): " + ", ".join(pre))
        return out

    def confirm_field(self, key: str) -> list[Change]:
        """The reviewer confirms field ``key`` (Enter): an empty field takes kws's
        suggestion; a set one keeps its value and loses its re-flag (the reviewer looked
        again). Returns the change (empty when the value stays)."""
        if not self.values.get(key):
            return self.accept_suggestion(key)
        if key in self.reflagged:
            self.reflagged.pop(key)
            value = self.values[key]
            if key in self._accepted:
                self._accepted[key] = (value, self._signature(key))
            self._touch()
        return []

    def _touch(self) -> None:
        self.touched = True
        if self.on_change is not None:
            self.on_change(self)

    def mark_committed(self) -> None:
        """The verdict is committed (its draft removed): later check events save no draft
        until the reviewer changes something again."""
        self.touched = False

    def _meta(self) -> tuple[dict[str, str], dict[str, tuple[str, tuple[Any, ...] | None]], dict[str, str]]:
        return dict(self.suggested), dict(self._accepted), dict(self.reflagged)

    def _set_meta(self, meta: tuple[dict[str, str], dict[str, Any], dict[str, str]]) -> None:
        self.suggested, self._accepted, self.reflagged = dict(meta[0]), dict(meta[1]), dict(meta[2])

    def _apply(self, changes: list[Change], record: bool = True,
               accepted: Mapping[str, str] | None = None) -> list[Change]:
        """Apply ``changes``; fields in ``accepted`` took kws's suggestion (their
        provenance is noted), any other changed field is the reviewer's own pick."""
        real = [(k, old, new) for k, old, new in changes if old != new]
        if not real:
            return []
        before = self._meta()
        for k, _old, new in real:
            if new is None or new == "":
                self.values.pop(k, None)
            else:
                self.values[k] = new
            if accepted is not None and k in accepted and new:
                self._note_accepted(k, new)
            elif k != self.rubric.rationale_field:
                self._forget_accepted(k)
        if record:
            self._undo.append((real, before, self._meta()))
            self._redo.clear()
        self._touch()
        return real

    def set_value(self, key: str, value: str | None) -> list[Change]:
        """Set choice field ``key`` to ``value`` (None clears it); undoable.

        Raises:
            KeyError: ``key`` is not a choice field or ``value`` not one of its values.
        """
        f = self.rubric.field(key)
        if f is None or not f.is_choice:
            raise KeyError(f"{key!r} is not a choice field of rubric {self.rubric.id}")
        if value is not None and value not in f.allowed:
            raise KeyError(f"{value!r} is not one of {', '.join(f.allowed)}")
        return self._apply([(key, self.values.get(key), value)])

    def pick_by_key(self, key: str, char: str) -> list[Change]:
        """Set field ``key`` to the value whose keyboard character is ``char`` (the rubric's
        ``key`` of the value); no change when no value has that character."""
        f = self.rubric.field(key)
        v = f.by_key(char) if f is not None and f.is_choice else None
        return self.set_value(key, v.value) if v is not None else []

    def pick_nth(self, key: str, n: int) -> list[Change]:
        """Set field ``key`` to its ``n``-th value (1-based, in the rubric's order: worst
        first on an ordered field); no change when it has fewer values."""
        f = self.rubric.field(key)
        if f is None or not f.is_choice or not 1 <= n <= len(f.values):
            return []
        return self.set_value(key, f.values[n - 1].value)

    def accept_suggestion(self, key: str) -> list[Change]:
        """Take kws's suggestion for ``key`` (no change when there is none); its
        provenance is noted (:meth:`provenance`)."""
        s = self.suggestions().get(key)
        if s is None or s.value is None:
            return []
        f = self.rubric.field(key)
        if f is None or not f.is_choice:
            return []
        return self._apply([(key, self.values.get(key), s.value)], accepted={key: s.value})

    def accept_all_suggestions(self, *, overwrite: bool = False) -> list[Change]:
        """Take every suggestion for fields without a value (every field with
        ``overwrite``); one undo step."""
        accepted = {k: s.value for k, s in self.suggestions().items()
                    if s.value is not None and (overwrite or not self.values.get(k))}
        return self._apply([(k, self.values.get(k), v) for k, v in accepted.items()], accepted=accepted)

    def set_rationale(self, text: str) -> list[Change]:
        """Replace the rationale (the editor's text). Not an undo step: the editor has
        its own undo."""
        return self._apply([(self.rubric.rationale_field, self.rationale, text)], record=False)

    def prefill_rationale(self, findings: Sequence[Mapping[str, Any]]) -> list[Change]:
        """Append a line per finding (see :func:`rationale_from_findings`) to the
        rationale; one undo step. Lines already present are not added twice."""
        cur = self.rationale.rstrip()
        add = [ln for ln in rationale_from_findings(findings).splitlines() if ln not in cur]
        if not add:
            return []
        new = (cur + "\n" if cur else "") + "\n".join(add) + "\n"
        return self._apply([(self.rubric.rationale_field, self.rationale, new)])

    def undo(self) -> list[Change]:
        """Undo the last undoable change (and what it did to the provenance of accepted
        suggestions); returns it (empty when there is none)."""
        if not self._undo:
            return []
        step, before, after = self._undo.pop()
        self._apply([(k, new, old) for k, old, new in reversed(step)], record=False)
        self._set_meta(before)
        self._redo.append((step, before, after))
        return step

    def redo(self) -> list[Change]:
        """Redo the last undone change."""
        if not self._redo:
            return []
        step, before, after = self._redo.pop()
        self._apply(step, record=False)
        self._set_meta(after)
        self._undo.append((step, before, after))
        return step

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def problems(self) -> list[str]:
        """What stops a commit (rubric validation), as readable strings."""
        return validate_values(self.rubric, self.values)

    # ---- draft and commit ----------------------------------------------------------------

    def outdated_draft(self, tree: str | None) -> str:
        """Why the restored draft is outdated now that the task's version in HEAD is known
        to be ``tree`` ("" when it is not: no draft, or the same version): its values were
        entered while judging another version of the task."""
        if not self.draft_tree or not tree or tree == self.draft_tree:
            return ""
        return (f"draft outdated: your values were entered on task version {self.draft_tree[:10]}, and the task "
                f"changed since (now {tree[:10]}); check each value against this version")

    def draft(self) -> Draft:
        """The draft to autosave: values, rubric, the task tree judged and the report."""
        return Draft(
            task=self.task_id,
            queue=str(self.queue_root),
            values=dict(self.values),
            rubric_id=self.rubric.id,
            rubric_version=self.rubric.version,
            task_tree=self.task_tree,
            report=self.final_report or (self.report() if self.rows else None),
            suggested={k: v for k, v in self.suggested.items() if self.values.get(k)},
            unfinished_checks=self.unfinished_checks(),
        )

    def commit(self, repo: Any) -> Any:
        """Commit the verdict through :func:`workstation.records.store.commit_verdict` (one git
        commit) and return the :class:`~workstation.records.model.Verdict`. Raises its
        RecordError / IdentityError with the reason when nothing was committed."""
        from workstation.records.model import RecordError
        from workstation.records.store import commit_verdict

        problems = self.problems()
        if problems:
            raise RecordError("verdict not committed:\n  " + "\n  ".join(problems))
        return commit_verdict(repo, self.draft(), self.rubric)


def _union(first: Sequence[str], then: Sequence[str]) -> list[str]:
    """``first`` followed by the ids of ``then`` not in it."""
    return [*first, *(c for c in then if c not in first)]
