"""The review session: one reviewer judging one task. Pure Python, no Textual.

The TUI displays a :class:`ReviewSession` and dispatches keys to it; everything it shows
is computed here or in the engine:

- **check sources** run the battery and stream events (:class:`RunnerCheckSource`: the
  real engine in an isolated fork server; :class:`ReplayCheckSource`: a recorded event
  stream, for tests and demos). Events are JSON-ready dicts, normalised by
  :func:`normalise_event`;
- the **checks table** (:class:`CheckRow`) fills in as events arrive, and the session
  keeps a report in the shape of ``kws check --json`` (task format v1) for the rubric's
  suggestions (:func:`workstation.rubric.model.suggest`) and the verdict;
- the **rubric values** with one-key picks, accept-the-suggestion, undo and redo, the
  rationale and its prefill from findings, validation, the draft (autosaved by
  :class:`DraftSaver` after every change), and the commit
  (:func:`workstation.records.store.commit_verdict`);
- **evidence** of a finding as labelled lines (:func:`evidence_lines`), and the
  **timing** evidence of ``speedup-claim`` (:class:`TimingView`) with a text histogram.

Nothing here imports torch or triton: the engine runs task code in child processes.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workstation.records.drafts import Draft
from workstation.rubric.model import Rubric, Suggestion, suggest, validate_values

__all__ = [
    "RUNNING_STATES",
    "CheckRow",
    "CheckSource",
    "DraftSaver",
    "ReplayCheckSource",
    "ReviewSession",
    "RunnerCheckSource",
    "TaskView",
    "TimingSide",
    "TimingView",
    "case_label",
    "evidence_lines",
    "finding_source",
    "histogram",
    "histogram_blocks",
    "load_task_view",
    "normalise_event",
    "rationale_from_findings",
]

Emit = Callable[[str, dict[str, Any]], None]
#: check-row states before a result: waiting for a slot, running now.
RUNNING_STATES = ("queued", "running")
_SEV_RANK = {"fail": 0, "warn": 1, "info": 2}


# --------------------------------------------------------------------------------------------
# events and check sources


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def normalise_event(kind: str, data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An engine event (:func:`workstation.engine.run.run_checks`) as JSON-ready data.

    ``start`` -> ``{"checks": [ids], "device": label}``; ``check_started`` ->
    ``{"check": id}``; ``check_finished`` -> ``{"result": {"check", "status", "seconds",
    "reason", "findings": [finding dicts]}}``; ``done`` -> ``{"report": <kws check --json
    dict>}``. Non-finite floats become "nan"/"inf"/"-inf" as in the contract's JSON.
    """
    if kind == "check_finished":
        r = data["result"]
        if hasattr(r, "as_dict"):
            d = r.as_dict()
            d["findings"] = [f.as_dict() for f in r.findings]
        else:
            d = dict(r)
        return kind, {"result": _finite(d)}
    if kind == "done":
        res = data.get("result")
        if res is not None and not isinstance(res, Mapping):
            from workstation.engine.report import to_json_dict

            return kind, {"report": to_json_dict(res)}
        return kind, {"report": _finite(dict(data.get("report") or {}))}
    return kind, _finite(dict(data))


class CheckSource(Protocol):
    """Something that runs checks on a task folder and streams normalised events.

    ``run`` is called from a worker thread (never the UI thread); it calls ``emit`` for
    every event (``start``, ``check_started``, ``check_finished``, ``done``, or ``error``
    with ``{"message"}`` when the run could not happen) and returns the final report
    (None after an error). ``only`` restricts the run to those check ids.
    """

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class RunnerCheckSource:
    """The real battery, in a check server process of its own
    (:mod:`workstation.engine.server`: the engine and one fork-server
    :class:`~workstation.runner.Runner`), started on first use.

    The app's process only reads the server's events (a reader thread, blocked on a pipe),
    so the engine's own work (imports, numpy comparisons) never competes with the UI for
    the GIL, and this process imports neither torch nor triton nor the engine. Task code
    runs in the runner's niced child processes. :meth:`close` ends the server's stdin and
    returns at once; the server closes the runner (killing jobs) on its own.
    """

    def __init__(self, device: str | None = None) -> None:
        self._device = device
        self._proc: Any = None
        self._lock = threading.Lock()
        self._runs: dict[int, tuple[Emit, threading.Event, list[Any]]] = {}
        self._next = 0
        self._closed = False
        self._warm = threading.Event()
        self._warm_reply: dict[str, Any] = {}
        self._log: Path | None = None

    def _ensure(self) -> Any:
        import subprocess
        import sys
        import tempfile

        with self._lock:
            if self._closed:
                raise RuntimeError("the check runner is closed")
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            env = dict(os.environ)
            if self._device:
                env["KWS_CHECKSERVER_DEVICE"] = self._device
            fd, log = tempfile.mkstemp(prefix="kws-checkserver-", suffix=".log")
            self._log = Path(log)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "workstation.engine.server"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, env=env, text=True,
                bufsize=1, start_new_session=True,  # a dropped SSH session's SIGHUP spares it: it cleans up
            )
            os.close(fd)
            threading.Thread(target=self._read, args=(self._proc,), name="kws-checkserver-reader",
                             daemon=True).start()
            return self._proc

    def _send(self, obj: dict[str, Any]) -> None:
        proc = self._ensure()
        with self._lock:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(obj) + "\n")
            proc.stdin.flush()

    def _read(self, proc: Any) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("op") == "warm":
                self._warm_reply = msg
                self._warm.set()
                continue
            with self._lock:
                entry = self._runs.get(msg.get("run"))
            if entry is None:
                continue
            emit, done, result = entry
            kind, data = msg["kind"], msg["data"]
            emit(kind, data)
            if kind in ("done", "error"):
                result.append(data.get("report") if kind == "done" else None)
                done.set()
        # the server is gone: fail whatever still waits
        tail = ""
        if self._log is not None:
            try:
                tail = self._log.read_text(errors="replace")[-1500:]
            except OSError:
                pass
        with self._lock:
            pending = list(self._runs.values())
        for emit, done, result in pending:
            if not done.is_set():
                emit("error", {"message": "the kws check server exited" + (f": {tail}" if tail else "")})
                result.append(None)
                done.set()
        self._warm_reply = self._warm_reply or {"error": "the kws check server exited"}
        self._warm.set()

    def warm_up(self) -> str:
        """Start the server and its fork server now (blocking; call from a worker).
        Returns the device label. Raises RuntimeError when it could not start."""
        self._send({"op": "warm"})
        self._warm.wait(300)
        if "error" in self._warm_reply:
            raise RuntimeError(self._warm_reply["error"])
        return str(self._warm_reply.get("device", ""))

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None:
        done = threading.Event()
        result: list[Any] = []
        with self._lock:
            self._next += 1
            rid = self._next
            self._runs[rid] = (emit, done, result)
        try:
            self._send({"op": "run", "run": rid, "task_dir": str(task_dir),
                        "only": list(only) if only else None})
            done.wait()
        except (OSError, RuntimeError) as e:
            emit("error", {"message": f"the kws check server is not available: {e}"})
            return None
        finally:
            with self._lock:
                self._runs.pop(rid, None)
        return result[0] if result else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()  # the server closes its runner and exits by itself
            except OSError:
                pass


class ReplayCheckSource:
    """Replays recorded event streams (``tests/fixtures/events/<task>.json``: ``{"task",
    "events": [[kind, data], ...]}``), for deterministic tests, snapshots and demos.

    ``delay_s`` sleeps before each event; ``gate``, when given, is waited on before the
    first ``check_finished`` (so a test can look at the screen while checks "run").
    With ``only``, only those checks' events are replayed and the final report holds
    only them.
    """

    def __init__(self, streams: Mapping[str, Mapping[str, Any]] | Path | str, *, delay_s: float = 0.0,
                 gate: threading.Event | None = None) -> None:
        if isinstance(streams, str | Path):
            folder = Path(streams)
            streams = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}
        self.streams = dict(streams)
        self.delay_s = delay_s
        self.gate = gate
        self.runs: list[tuple[str, tuple[str, ...] | None]] = []

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None:
        task_id = Path(task_dir).name
        self.runs.append((task_id, tuple(only) if only else None))
        stream = self.streams.get(task_id)
        if stream is None:
            emit("error", {"message": f"no recorded check run for {task_id}"})
            return None
        keep = set(only) if only else None
        report: dict[str, Any] | None = None
        gated = False
        for kind, data in stream["events"]:
            if self.delay_s:
                time.sleep(self.delay_s)
            if kind == "start" and keep is not None:
                data = {**data, "checks": [c for c in data["checks"] if c in keep]}
            elif kind == "check_started" and keep is not None and data["check"] not in keep:
                continue
            elif kind == "check_finished":
                if keep is not None and data["result"]["check"] not in keep:
                    continue
                if self.gate is not None and not gated:
                    self.gate.wait(30)
                    gated = True
            elif kind == "done":
                report = dict(data["report"])
                if keep is not None:
                    report["checks"] = [c for c in report["checks"] if c["check"] in keep]
                    report["findings"] = [f for f in report["findings"] if f["check"] in keep]
                    report["complete"] = all(c["status"] not in ("skip", "error") for c in report["checks"])
                data = {"report": report}
            emit(kind, json.loads(json.dumps(data)))
        return report

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------
# the session


@dataclass
class CheckRow:
    """One check in the checks table. ``status``: ``queued`` / ``running`` until its
    result arrives, then the contract's pass / warn / fail / skip / error. ``seconds`` is
    the check's wall time (None until it finishes); ``started`` the monotonic time it
    started (for a live clock)."""

    check: str
    status: str = "queued"
    seconds: float | None = None
    reason: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    started: float | None = None

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
    """

    def __init__(self, task_id: str, queue_root: Path | str, rubric: Rubric, *,
                 draft: Draft | None = None, on_change: Callable[[ReviewSession], None] | None = None) -> None:
        self.task_id = task_id
        self.queue_root = Path(queue_root)
        self.rubric = rubric
        self.values: dict[str, str] = {}
        self.rows: dict[str, CheckRow] = {}
        self.device = ""
        self.versions: dict[str, str] = {}
        self.seeds: list[int] = []
        self.report_tree: str | None = None
        self.task_tree: str | None = None
        self.final_report: dict[str, Any] | None = None
        self.error: str = ""
        self.run_started: float | None = None
        self.run_seconds: float | None = None
        self.on_change = on_change
        self._undo: list[list[Change]] = []
        self._redo: list[list[Change]] = []
        self._version = 0  # bumped by every check event (see suggestions())
        self._suggested: tuple[int, dict[str, Suggestion]] | None = None
        if draft is not None:
            self.values = {k: v for k, v in draft.values.items() if rubric.field(k) is not None}
            self.task_tree = draft.task_tree

    # ---- checks --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(not r.done for r in self.rows.values())

    def begin_run(self, only: Iterable[str] | None = None) -> None:
        """Mark a run as started: with ``only``, those rows go back to queued; otherwise
        the table is cleared until the ``start`` event lists the checks."""
        self._version += 1
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
        """Apply one normalised event; returns the check id it concerns (or None)."""
        self._version += 1
        if kind == "start":
            self.device = str(data.get("device") or "")
            for cid in data.get("checks") or []:
                self.rows[cid] = CheckRow(cid)
            return None
        if kind == "check_started":
            cid = data["check"]
            row = self.rows.setdefault(cid, CheckRow(cid))
            row.status, row.started = "running", time.monotonic()
            return cid
        if kind == "check_finished":
            r = data["result"]
            cid = r["check"]
            self.rows[cid] = CheckRow(cid, r["status"], float(r.get("seconds") or 0.0), r.get("reason") or "",
                                      list(r.get("findings") or []))
            return cid
        if kind == "done":
            rep = dict(data.get("report") or {})
            self.device = rep.get("device") or self.device
            self.versions = dict(rep.get("versions") or {})
            self.seeds = list(rep.get("seeds") or [])
            self.report_tree = rep.get("task_tree")
            secs = rep.get("seconds")  # the engine's own wall time (kws extension of the report)
            if isinstance(secs, int | float):
                self.run_seconds = float(secs)
            elif self.run_started:
                self.run_seconds = time.monotonic() - self.run_started
            # a partial run (one check re-run) merges into the rows; the full report is rebuilt
            for c in rep.get("checks") or []:
                row = self.rows.get(c["check"])
                if row is not None and not row.done:
                    row.status, row.seconds, row.reason = c["status"], c.get("seconds"), c.get("reason") or ""
            self.final_report = self.report()
            return None
        if kind == "error":
            self.error = str(data.get("message") or "the check run failed")
            for row in self.rows.values():
                if not row.done:
                    row.status, row.reason = "error", self.error
            return None
        return None

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding so far, in check order, worst first within a check."""
        out = []
        for row in self.rows.values():
            out.extend(sorted(row.findings, key=lambda f: _SEV_RANK.get(f.get("severity"), 3)))
        return out

    def report(self) -> dict[str, Any]:
        """The checks so far in the shape of ``kws check --json`` (task format v1).
        ``complete`` is false while a check is queued or running, or ended in skip/error."""
        done = [r for r in self.rows.values() if r.done]
        complete = bool(self.rows) and len(done) == len(self.rows) and all(
            r.status not in ("skip", "error") for r in done)
        return {
            "task": self.task_id,
            "task_tree": self.report_tree,
            "device": self.device,
            "complete": complete,
            "versions": dict(self.versions),
            "seeds": list(self.seeds),
            "findings": [f for r in done for f in r.findings],
            "checks": [r.as_check() for r in done],
        }

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
            self._suggested = (self._version, suggest(self.rubric, rep["findings"], rep["checks"]))
        return self._suggested[1]

    @property
    def rationale(self) -> str:
        return self.values.get(self.rubric.rationale_field, "")

    def _apply(self, changes: list[Change], record: bool = True) -> list[Change]:
        real = [(k, old, new) for k, old, new in changes if old != new]
        if not real:
            return []
        for k, _old, new in real:
            if new is None or new == "":
                self.values.pop(k, None)
            else:
                self.values[k] = new
        if record:
            self._undo.append(real)
            self._redo.clear()
        if self.on_change is not None:
            self.on_change(self)
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

    def accept_suggestion(self, key: str) -> list[Change]:
        """Take kws's suggestion for ``key`` (no change when there is none)."""
        s = self.suggestions().get(key)
        if s is None or s.value is None:
            return []
        return self.set_value(key, s.value)

    def accept_all_suggestions(self, *, overwrite: bool = False) -> list[Change]:
        """Take every suggestion for fields without a value (every field with
        ``overwrite``); one undo step."""
        changes: list[Change] = []
        for k, s in self.suggestions().items():
            if s.value is None:
                continue
            if overwrite or not self.values.get(k):
                changes.append((k, self.values.get(k), s.value))
        return self._apply(changes)

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
        """Undo the last undoable change; returns it (empty when there is none)."""
        if not self._undo:
            return []
        step = self._undo.pop()
        self._apply([(k, new, old) for k, old, new in reversed(step)], record=False)
        self._redo.append(step)
        return step

    def redo(self) -> list[Change]:
        """Redo the last undone change."""
        if not self._redo:
            return []
        step = self._redo.pop()
        self._apply(step, record=False)
        self._undo.append(step)
        return step

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def problems(self) -> list[str]:
        """What stops a commit (rubric validation), as readable strings."""
        return validate_values(self.rubric, self.values)

    # ---- draft and commit ----------------------------------------------------------------

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
        )

    def commit(self, repo: Any) -> Any:
        """Commit the verdict through :func:`workstation.records.store.commit_verdict` (one git
        commit) and return the :class:`~workstation.records.store.Verdict`. Raises its
        RecordError / IdentityError with the reason when nothing was committed."""
        from workstation.records.model import RecordError
        from workstation.records.store import commit_verdict

        problems = self.problems()
        if problems:
            raise RecordError("verdict not committed:\n  " + "\n  ".join(problems))
        return commit_verdict(repo, self.draft(), self.rubric)


# --------------------------------------------------------------------------------------------
# autosave


class DraftSaver:
    """Writes drafts in a background thread, newest wins: :meth:`submit` returns at once;
    the thread saves the latest submitted draft (atomic write, see
    :func:`workstation.records.drafts.save_draft`). ``on_error(exc)`` is called from the thread when
    a save fails. :meth:`flush` waits until everything submitted is on disk."""

    def __init__(self, on_error: Callable[[BaseException], None] | None = None,
                 save: Callable[[Draft], Any] | None = None) -> None:
        from workstation.records.drafts import save_draft

        self._save = save or save_draft
        self._on_error = on_error
        self._cv = threading.Condition()
        self._pending: Draft | None = None
        self._busy = False
        self._closed = False
        self.saved = 0
        self._thread = threading.Thread(target=self._loop, name="kws-draft-saver", daemon=True)
        self._thread.start()

    def submit(self, draft: Draft) -> None:
        with self._cv:
            self._pending = draft
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                if self._pending is None and self._closed:
                    return
                d, self._pending = self._pending, None
                self._busy = True
            try:
                self._save(d)
                self.saved += 1
            except Exception as e:  # noqa: BLE001  (reported to the UI, never fatal)
                if self._on_error is not None:
                    self._on_error(e)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until no draft is pending or being written; False on timeout."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._pending is not None or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush, then stop the thread."""
        self.flush(timeout)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout)


# --------------------------------------------------------------------------------------------
# evidence


def case_label(case: Mapping[str, Any] | None) -> str:
    """``{"M": 64, "N": 1000, "dtype": "float16"}`` -> ``"M=64 N=1000 float16"``."""
    if not isinstance(case, Mapping):
        return str(case)
    parts = [f"{k}={v}" for k, v in case.items() if k != "dtype"]
    if "dtype" in case:
        parts.append(str(case["dtype"]))
    return " ".join(parts)


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
    for key, label in _EVIDENCE_ORDER:
        if key in ev:
            v = ev.pop(key)
            if key == "case":
                out.append((label, case_label(v)))
            elif key == "headroom_used" and isinstance(v, int | float):
                out.append((label, f"{100 * v:.3g}%"))
            else:
                out.append((label, _num(v)))
    worst = ev.pop("worst", None)
    if isinstance(worst, Mapping):
        if "index" in worst:
            out.append(("worst at", _num(worst["index"])))
        if "expected" in worst or "got" in worst:
            out.append(("expected", _num(worst.get("expected"))))
            out.append(("got", _num(worst.get("got"))))
        for k in ("abs_err", "rel_err", "ulp", "allowed"):
            if k in worst:
                out.append((k.replace("_", " "), _num(worst[k])))
    tol = ev.pop("tolerance", None)
    if isinstance(tol, Mapping):
        parts = [f"{k}={_num(v)}" for k, v in tol.items() if v is not None and k not in ("source",)]
        src = f" ({tol['source']})" if tol.get("source") else ""
        out.append(("tolerance", " ".join(parts) + src))
    elif tol is not None:
        out.append(("tolerance", _compact(tol)))
    if "derivation" in ev:
        out.append(("derivation", _compact(ev.pop("derivation"), 2000)))
    for key, label in (("type", "exception"), ("message", "message"), ("death", "death"),
                       ("status", "status"), ("signal", "signal"), ("where", "where")):
        if key in ev:
            out.append((label, _compact(ev.pop(key))))
    for key in ("traceback_tail", "stderr_tail"):
        if key in ev:
            out.append((key.replace("_", " "), str(ev.pop(key))))
    src = finding_source(f)
    ev.pop("source", None)
    if src is not None:
        out.append(("source", f"{src[0]}:{src[1]}"))
    ev.pop("timing", None)  # the timing panel shows it
    for k, v in ev.items():
        out.append((k.replace("_", " "), _compact(v)))
    if f.get("repro"):
        out.append(("repro", str(f["repro"])))
    return out


def rationale_from_findings(findings: Sequence[Mapping[str, Any]]) -> str:
    """Rationale lines citing findings: ``- <check> (<severity>): <summary> [case ...,
    seed ...]``, one per finding, worst first."""
    lines = []
    for f in sorted(findings, key=lambda x: _SEV_RANK.get(x.get("severity"), 3)):
        ev = f.get("evidence") or {}
        where = []
        if isinstance(ev.get("case"), Mapping):
            where.append(f"case {case_label(ev['case'])}")
        if "seed" in ev:
            where.append(f"seed {ev['seed']}")
        tail = f" [{', '.join(where)}]" if where else ""
        lines.append(f"- {f.get('check')} ({f.get('severity')}): {f.get('summary', '')}{tail}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# timing


@dataclass(frozen=True)
class TimingSide:
    """One side of a timing comparison (candidate, baseline, torch_compile), times in ms."""

    name: str
    samples_ms: tuple[float, ...]
    cold_ms: float | None
    warm_ms: float | None
    median_ms: float | None
    iqr_ms: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class TimingView:
    """The ``speedup-claim`` evidence (``evidence["timing"]``) ready to display.

    ``ratio`` is the measured speedup of candidate over baseline (baseline time /
    candidate time), ``ratio_ci`` its confidence interval at ``ci_level``; ``claimed`` the
    task's claimed speedup (0: none). ``representative`` False means the timing says
    nothing about production (e.g. measured under the Triton interpreter): ``reason``.
    """

    device: str
    protocol: str
    representative: bool
    reason: str
    sides: tuple[TimingSide, ...]
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    ci_level: float | None
    claimed: float
    case: Mapping[str, Any] | None
    severity: str = ""
    summary: str = ""

    @classmethod
    def from_finding(cls, f: Mapping[str, Any]) -> TimingView | None:
        """The view of a finding whose evidence holds ``timing``; None otherwise."""
        t = (f.get("evidence") or {}).get("timing")
        if not isinstance(t, Mapping):
            return None
        sides = []
        for name, s in (t.get("sides") or {}).items():
            if not isinstance(s, Mapping):
                continue
            iqr = s.get("iqr_ms")
            sides.append(TimingSide(
                name=str(name),
                samples_ms=tuple(float(x) for x in s.get("samples_ms") or [] if _is_num(x)),
                cold_ms=_opt_float(s.get("cold_ms")),
                warm_ms=_opt_float(s.get("warm_ms")),
                median_ms=_opt_float(s.get("median_ms")),
                iqr_ms=(float(iqr[0]), float(iqr[1])) if isinstance(iqr, list | tuple) and len(iqr) == 2
                and all(_is_num(x) for x in iqr) else None,
                n=int(s.get("n") or len(s.get("samples_ms") or [])),
            ))
        ci = t.get("ratio_ci")
        return cls(
            device=str(t.get("device") or ""),
            protocol=str(t.get("protocol") or ""),
            representative=bool(t.get("representative", True)),
            reason=str(t.get("reason") or ""),
            sides=tuple(sides),
            ratio=_opt_float(t.get("ratio")),
            ratio_ci=(float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2
            and all(_is_num(x) for x in ci) else None,
            ci_level=_opt_float(t.get("ci_level")),
            claimed=_opt_float(t.get("claimed")) or 0.0,
            case=t.get("case") if isinstance(t.get("case"), Mapping) else None,
            severity=str(f.get("severity") or ""),
            summary=str(f.get("summary") or ""),
        )

    def range_ms(self) -> tuple[float, float] | None:
        """The common axis of every side's samples (min, max), for comparable histograms."""
        xs = [x for s in self.sides for x in s.samples_ms]
        return (min(xs), max(xs)) if xs else None

    def speedup_line(self) -> str:
        """``speedup 1.21x (95% CI 1.15-1.28) vs claimed 1.30x: the claim is above the
        interval``: where the claim falls relative to the measured interval."""
        if self.ratio is None:
            return "speedup: not measured"
        s = f"speedup {self.ratio:.3g}×"
        if self.ratio_ci is not None:
            lvl = f"{100 * self.ci_level:.0f}% " if self.ci_level else ""
            s += f" ({lvl}CI {self.ratio_ci[0]:.3g}–{self.ratio_ci[1]:.3g})"
        if self.claimed:
            s += f" vs claimed {self.claimed:.3g}×"
            if self.ratio_ci is not None:
                lo, hi = self.ratio_ci
                if self.claimed > hi:
                    s += ": claim above the interval"
                elif self.claimed < lo:
                    s += ": measured faster than claimed"
                else:
                    s += ": claim within the interval"
        else:
            s += " (no claim)"
        return s


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _opt_float(x: Any) -> float | None:
    return float(x) if _is_num(x) else None


def timing_views(findings: Iterable[Mapping[str, Any]]) -> list[TimingView]:
    """Every finding with timing evidence as a :class:`TimingView`, in order."""
    return [v for f in findings if (v := TimingView.from_finding(f)) is not None]


def histogram(samples: Sequence[float], lo: float, hi: float, bins: int, *, log: bool = False) -> list[int]:
    """Counts of ``samples`` in ``bins`` equal-width bins over ``[lo, hi]`` (the last bin
    closed); with ``log`` the bins are equal in log10 (for sides that differ by orders of
    magnitude; needs ``lo > 0``). With ``hi == lo`` every sample falls in the middle bin."""
    counts = [0] * bins
    if bins <= 0:
        return counts
    if log and lo > 0:
        lo, hi = math.log10(lo), math.log10(hi)
        samples = [math.log10(x) for x in samples if x > 0]
    width = (hi - lo) / bins
    for x in samples:
        if width <= 0:
            i = bins // 2
        else:
            i = int((x - lo) / width)
            i = min(max(i, 0), bins - 1)
        counts[i] += 1
    return counts


_BLOCKS = " ▁▂▃▄▅▆▇█"


def histogram_blocks(counts: Sequence[int], peak: int | None = None) -> str:
    """One text row of Unicode block characters, height proportional to each count
    (relative to ``peak``, default the largest count); an empty bin is a space, a
    non-empty bin at least ``▁``."""
    top = peak if peak is not None else max(counts, default=0)
    if top <= 0:
        return " " * len(counts)
    out = []
    for c in counts:
        if c <= 0:
            out.append(" ")
        else:
            out.append(_BLOCKS[max(1, min(8, round(8 * c / top)))])
    return "".join(out)


# --------------------------------------------------------------------------------------------
# the task's files for the spec and source panels


@dataclass
class TaskView:
    """What the spec and source panels show of a task.

    ``files`` are (label, :class:`~workstation.review.diff.FileDiff`) pairs: first the
    candidate against its baseline (``[entry] baseline``) or the translation's original
    (``original``, a kws extension key), or a plain listing without either; then the other
    task files (reference, inputs, baseline/original, test, bench) as listings.
    ``sources[label]`` is ``(old name, old text, new name, new text)`` for highlighting.
    ``problem`` is set (and the rest empty) when the task does not load.
    """

    title: str = ""
    spec: str = ""
    files: list[tuple[str, Any]] = field(default_factory=list)
    sources: dict[str, tuple[str | None, str, str, str]] = field(default_factory=dict)
    problem: str = ""
    bytes: int = 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"(cannot read {path.name}: {e})"


def load_task_view(task_dir: Path | str) -> TaskView:
    """Read a task's spec and sources and build its diffs (no git, no task code run)."""
    from workstation.review.diff import diff_files, listing
    from workstation.schema.problem import Problem
    from workstation.task.format import load_task

    task_dir = Path(task_dir)
    try:
        task = load_task(task_dir)
    except Problem as e:
        return TaskView(problem=str(e))
    view = TaskView(title=task.title, spec=_read_text(task_dir / task.spec) or "*(empty spec)*")
    cand = task.entry["candidate"].file
    has_base = "baseline" in task.entry
    base_name = task.entry["baseline"].file if has_base else task.original
    new = _read_text(task_dir / cand)
    old = _read_text(task_dir / base_name) if base_name else None
    label = "candidate" + (f" vs {'baseline' if has_base else 'original'}" if base_name else "")
    view.files.append((label, diff_files(old, new, base_name, cand)))
    view.sources[label] = (base_name, old or "", cand, new)
    view.bytes = len(new) + len(old or "")
    others = [("reference", task.entry["reference"].file), ("inputs", task.entry["inputs"].file)]
    if base_name:
        others.append(("baseline" if has_base else "original", base_name))
    if task.original and task.original != base_name:
        others.append(("original", task.original))
    for role in ("test", "bench"):
        if role in task.entry:
            others.append((role, task.entry[role].file))
    seen = {cand}
    for role, name in others:
        if name in seen:
            continue
        seen.add(name)
        text = _read_text(task_dir / name)
        lbl = f"{role}: {name}"
        view.files.append((lbl, listing(text, name)))
        view.sources[lbl] = (None, "", name, text)
        view.bytes += len(text)
    return view


def task_files_size(task_dir: Path | str) -> int:
    """Total bytes of the files in a task folder (one level), to decide whether its view
    is cheap enough to build on the UI thread."""
    total = 0
    try:
        for e in os.scandir(task_dir):
            if e.is_file():
                total += e.stat().st_size
    except OSError:
        return 1 << 30
    return total
