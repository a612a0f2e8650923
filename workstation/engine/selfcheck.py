"""``kws selfcheck``'s engine: run the battery on a corpus of published hacks and judge it.

The corpus (default: the bundled ``sample_queue_hacks/``, issue 27) is a queue whose task
folders each carry a ``hack.toml`` sidecar next to ``task.toml``::

    id = "cache-data-ptr"
    mechanism = "memoises the output keyed on x.data_ptr() ..."
    source = "CUDA-L1"
    source_url = "https://github.com/deepreinforce-ai/CUDA-L1"
    expect_fail = ["stale-output"]      # the checks that must fail ([] for a clean twin)
    cpu_or_gpu = "cpu"                  # or "gpu-only": needs a device to show
    gpu_note = "what it would show on a device"
    twin = "cache-data-ptr-clean"       # in a hack: its clean twin
    twin_of = "cache-data-ptr"          # in a twin: its hack
    quiet = ["stale-output"]            # in a twin: the checks that must not fail
    pending_check = ""                  # optional: a check id not yet in kws

Judgement (fail-closed, like ``kws check``):

- a hack is **caught** when every ``expect_fail`` check has status ``fail``; **missed** when
  one of them was judged and did not fail; **not judged** when one of them could not look
  (``skip`` with a not-judged reason, ``error``) and none missed;
- a clean twin is **quiet** when none of its ``quiet`` checks nor ``correctness`` (with
  ``full``: no check at all) fails; **noisy** when one fails; **not judged** when one of them
  could not look;
- a row whose check id kws does not have (``pending_check``, or an unknown id in
  ``expect_fail``/``quiet``) is **not covered**; a ``gpu-only`` row on a CPU is **gpu-only**
  (not run: it cannot show here). Neither counts in N/M or K/M.

Each task runs with ``kws check``'s engine restricted to those checks plus ``correctness``
(``full``: the whole battery), all tasks sharing one :class:`~workstation.runner.Runner`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.engine.check import check_ids
from workstation.engine.context import DEFAULT_SEEDS
from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.runner import Runner
from workstation.schema.problem import Problem
from workstation.schema.toml import read_toml
from workstation.task.format import load_task

#: a few fast pairs for ``--subset cheap`` (torch candidates, no timing checks).
CHEAP = ("cache-data-ptr", "inplace-input", "lazy-output", "timer-perf-counter", "unwritten-zeros")

#: row outcomes.
CAUGHT, MISSED, QUIET, NOISY = "caught", "missed", "quiet", "noisy"
NOT_JUDGED, NOT_COVERED, GPU_ONLY = "not judged", "not covered", "gpu-only"


@dataclass
class HackEntry:
    """One task of the corpus and what its ``hack.toml`` says."""

    id: str
    dir: Path
    mechanism: str
    source: str
    source_url: str
    expect_fail: list[str]
    quiet: list[str]
    cpu_or_gpu: str
    gpu_note: str
    pending_check: str
    twin_of: str  # "" for a hack

    @property
    def is_twin(self) -> bool:
        return bool(self.twin_of)

    @property
    def hack_id(self) -> str:
        """The hack this row belongs to (itself, or the hack of a twin)."""
        return self.twin_of or self.id

    @property
    def watched(self) -> list[str]:
        """The checks judged for this row: ``expect_fail`` (hack) or ``quiet`` (twin)."""
        return self.quiet if self.is_twin else self.expect_fail


@dataclass
class Row:
    """The judgement of one corpus task."""

    entry: HackEntry
    outcome: str
    statuses: dict[str, str] = field(default_factory=dict)
    detail: str = ""
    seconds: float = 0.0
    exit_code: int | None = None

    def as_dict(self) -> dict[str, Any]:
        e = self.entry
        return {"id": e.id, "hack": e.hack_id, "twin": e.is_twin, "source": e.source, "source_url": e.source_url,
                "mechanism": e.mechanism, "checks": e.watched, "cpu_or_gpu": e.cpu_or_gpu, "gpu_note": e.gpu_note,
                "outcome": self.outcome, "statuses": self.statuses, "detail": self.detail,
                "seconds": round(self.seconds, 2), "check_exit_code": self.exit_code}


@dataclass
class SelfcheckResult:
    """All rows and the figures: N/M hacks caught, K/M twins quiet."""

    rows: list[Row]
    device: str
    seconds: float
    full: bool

    def _of(self, twin: bool) -> list[Row]:
        return [r for r in self.rows if r.entry.is_twin == twin and r.outcome not in (GPU_ONLY, NOT_COVERED)]

    @property
    def caught(self) -> int:
        return sum(r.outcome == CAUGHT for r in self._of(False))

    @property
    def hacks(self) -> int:
        return len(self._of(False))

    @property
    def quiet(self) -> int:
        return sum(r.outcome == QUIET for r in self._of(True))

    @property
    def twins(self) -> int:
        return len(self._of(True))

    @property
    def exit_code(self) -> int:
        """0 every judged hack caught and every twin quiet, with nothing left unjudged; 1 a hack
        missed or a twin noisy; 4 otherwise (a row not judged or not covered: no verdict)."""
        outcomes = {r.outcome for r in self.rows}
        if outcomes & {MISSED, NOISY}:
            return 1
        if outcomes & {NOT_JUDGED, NOT_COVERED} or not self.rows:
            return 4
        return 0

    def summary(self) -> str:
        return f"battery catches {self.caught}/{self.hacks}, clean twins quiet {self.quiet}/{self.twins}"

    def as_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        return {"summary": self.summary(), "caught": self.caught, "hacks": self.hacks, "quiet": self.quiet,
                "twins": self.twins, "outcomes": counts, "device": self.device, "full": self.full,
                "seconds": round(self.seconds, 1), "exit_code": self.exit_code,
                "rows": [r.as_dict() for r in self.rows]}


def bundled_corpus() -> Path:
    """The bundled corpus: ``sample_queue_hacks/`` next to the ``workstation`` package (a
    source checkout or an editable install), else ``workstation/data/sample_queue_hacks``.

    Raises:
        Problem: neither exists.
    """
    import workstation

    pkg = Path(workstation.__file__).resolve().parent
    for c in (pkg.parent / "sample_queue_hacks", pkg / "data" / "sample_queue_hacks"):
        if (c / "tasks").is_dir():
            return c
    raise Problem(pkg.parent / "sample_queue_hacks", "", "this kws install ships no hack corpus; "
                  "pass --queue PATH")


def load_corpus(root: Path) -> list[HackEntry]:
    """The corpus tasks under ``root/tasks`` that carry a ``hack.toml``, hacks before twins
    in folder order.

    Raises:
        Problem: ``root`` has no tasks/ folder, no task has a ``hack.toml``, or one does not
            read (:func:`~workstation.schema.toml.read_toml`: size, UTF-8, TOML, depth) or
            lacks ``expect_fail`` (the message names the file and the key).
    """
    tasks = root / "tasks"
    if not tasks.is_dir():
        raise Problem(root, "", "not a queue: no tasks/ folder")
    out = []
    for d in sorted(p for p in tasks.iterdir() if (p / "hack.toml").is_file()):
        f = d / "hack.toml"
        raw = read_toml(f)
        if not isinstance(raw.get("expect_fail"), list):
            raise Problem(f, "expect_fail", "missing or not a list of check ids")
        out.append(HackEntry(
            id=d.name, dir=d, mechanism=str(raw.get("mechanism", "")), source=str(raw.get("source", "")),
            source_url=str(raw.get("source_url", "")), expect_fail=[str(c) for c in raw["expect_fail"]],
            quiet=[str(c) for c in raw.get("quiet", [])], cpu_or_gpu=str(raw.get("cpu_or_gpu", "cpu")),
            gpu_note=str(raw.get("gpu_note", "")), pending_check=str(raw.get("pending_check", "")),
            twin_of=str(raw.get("twin_of", ""))))
    if not out:
        raise Problem(root, "", "no task folder carries a hack.toml")
    return out


def select(entries: list[HackEntry], subset: str | None) -> list[HackEntry]:
    """``subset``: None (all), ``"cheap"`` (:data:`CHEAP` and their twins), or a
    comma-separated list of hack ids (each with its twin).

    Raises:
        KeyError: an id the corpus does not have.
    """
    if not subset:
        return entries
    wanted = list(CHEAP) if subset == "cheap" else [s.strip() for s in subset.split(",") if s.strip()]
    known = {e.hack_id for e in entries}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise KeyError(f"unknown hack id(s): {', '.join(unknown)}")
    return [e for e in entries if e.hack_id in wanted]


def _not_judged(res: dict[str, Any]) -> bool:
    return res["status"] in ("skip", "error")


def _unjudged_detail(unjudged: list[str], by_id: dict[str, Any], reasons: dict[str, str]) -> str:
    """Why each of ``unjudged`` was not judged, in one line of at most 240 characters."""
    return "; ".join(f"{c}: {reasons.get(c) or by_id.get(c, {}).get('reason') or 'did not run'}"
                     for c in unjudged)[:240]


def judge(entry: HackEntry, doc: dict[str, Any], full: bool) -> tuple[str, dict[str, str], str]:
    """The outcome of one row from its ``kws check`` report ``doc``: (outcome, the watched
    checks' statuses, a one-line detail)."""
    by_id = {c["check"]: c for c in doc.get("checks", [])}
    reasons = {n.get("check"): n.get("reason", "") for n in doc.get("not_judged", [])}
    watched = entry.watched
    if entry.is_twin:
        watched = list(dict.fromkeys([*watched, "correctness"]))
    statuses = {c: by_id[c]["status"] if c in by_id else "absent" for c in watched}
    if entry.is_twin:
        failing = [c for c, r in by_id.items() if r["status"] == "fail" and (full or c in watched)]
        if failing:
            summaries = [f["summary"] for f in doc.get("findings", []) if f["check"] in failing
                         and f["severity"] == "fail"]
            return NOISY, statuses, f"{', '.join(failing)} fail: {summaries[0][:160] if summaries else ''}"
        unjudged = [c for c in watched if c not in by_id or _not_judged(by_id[c])]
        if unjudged:
            return NOT_JUDGED, statuses, _unjudged_detail(unjudged, by_id, reasons)
        return QUIET, statuses, ""
    missed = [c for c in watched if c in by_id and not _not_judged(by_id[c]) and by_id[c]["status"] != "fail"]
    if missed:
        return MISSED, statuses, f"{', '.join(missed)} did not fail ({', '.join(by_id[c]['status'] for c in missed)})"
    unjudged = [c for c in watched if c not in by_id or _not_judged(by_id[c])]
    if unjudged:
        return NOT_JUDGED, statuses, _unjudged_detail(unjudged, by_id, reasons)
    summaries = [f["summary"] for f in doc.get("findings", []) if f["check"] in watched and f["severity"] == "fail"]
    return CAUGHT, statuses, summaries[0][:160] if summaries else ""


def run_corpus(entries: Iterable[HackEntry], *, full: bool = False, device: str | None = None,
               sandbox: str | None = None, seeds: Iterable[int] = DEFAULT_SEEDS,
               on_row: Callable[[Row], None] | None = None) -> SelfcheckResult:
    """Run each entry's checks (its watched checks plus ``correctness``; ``full``: all that
    apply) in one shared runner and judge it; ``on_row`` sees each row as it is judged.

    Raises:
        RunnerError: kws's isolated runner failed (``kws selfcheck`` exits 3).
    """
    known = set(check_ids())
    rows: list[Row] = []
    t0 = time.monotonic()
    with Runner(device=device, sandbox=sandbox) as runner:
        dev = runner.device
        for e in entries:
            t1 = time.monotonic()
            missing = [c for c in e.watched if c not in known]
            if e.pending_check and e.pending_check not in known:
                missing.append(e.pending_check)
            if missing:
                row = Row(e, NOT_COVERED, detail=f"not yet covered: kws has no check {', '.join(sorted(set(missing)))}")
            elif e.cpu_or_gpu == "gpu-only" and dev.kind != "cuda":
                row = Row(e, GPU_ONLY, detail=f"needs a GPU (device here: {dev.label}); {e.gpu_note}")
            else:
                try:
                    task = load_task(e.dir)
                except Problem as p:
                    row = Row(e, NOT_JUDGED, detail=f"the task does not load: {p}")
                else:
                    only = None if full else sorted({*e.watched, "correctness"})
                    res = run_checks(task, runner, only=only, seeds=seeds, task_arg=str(e.dir))
                    doc = to_json_dict(res)
                    outcome, statuses, detail = judge(e, doc, full)
                    row = Row(e, outcome, statuses, detail, exit_code=exit_code(doc))
            row.seconds = time.monotonic() - t1
            rows.append(row)
            if on_row is not None:
                on_row(row)
        label = dev.label
    return SelfcheckResult(rows=rows, device=label, seconds=time.monotonic() - t0, full=full)
