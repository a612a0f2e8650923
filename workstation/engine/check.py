"""The check unit and the one registry of checks.

A check is a :class:`Check` subclass in a module of its own: an id, a docstring saying what it
catches, and ``run`` returning findings. It never runs task code itself: it asks its
:class:`~workstation.engine.context.CheckContext` to run steps in isolated children and judges
the data that comes back. Severities and statuses are the contract's
(``shared/spec/task-format.md``):

- finding severity: ``fail`` (the task does not hold up on this point), ``warn`` (a
  reviewer must look), ``info``;
- check status: the worst finding's severity (``pass`` when none), ``skip`` (with the
  reason: e.g. needs a GPU), ``error`` (the check itself broke: a bug in kws).

The registry follows pytest's plugin model: the engine defines what a check is and runs
whatever registered; it never imports a check module by name. :func:`load_checks` imports
every module of the :mod:`workstation.checks` package and every entry point of the
``kws.checks`` group (a team's own checks, shipped as a package), and each module registers
its class with :func:`register`. A check id is declared once, on its class; report order
comes from the class's :attr:`Check.order` (the contract's check-id table order; new ids
after), and every other place that needs ids (the rubric's ``informed_by`` validation, the
TUI's timing panel, ``--only``) asks the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from workstation.engine.context import CheckContext
    from workstation.task.model import Task

SEVERITIES = ("info", "warn", "fail")
_RANK = {"pass": 0, "info": 0, "warn": 1, "fail": 2}


@dataclass
class Finding:
    """One observation of a check.

    Attributes:
        check: the check id.
        severity: ``fail`` / ``warn`` / ``info``.
        summary: one line a reviewer can paste into a review.
        evidence: JSON-ready details: the case, the seed, max abs/rel error, the worst
            element (index, expected, got), the exception, a derivation...
            ``evidence["source"] = {"file", "line"}`` points at the task code concerned.
        repro: a shell command that reproduces the finding.
    """

    check: str
    severity: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    repro: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity, "summary": self.summary,
                "evidence": self.evidence, "repro": self.repro}


@dataclass
class CheckResult:
    """A check's outcome: status, wall seconds, the skip/error reason, its findings."""

    check: str
    status: str
    seconds: float
    reason: str = ""
    findings: list[Finding] = field(default_factory=list)
    #: why the check could not look ("" when it looked, or had nothing to look at).
    not_judged: str = ""
    #: the check failed because kws's runner failed (exit code 3).
    runner_failed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "seconds": round(self.seconds, 3),
                "reason": self.reason}


class Skip(Exception):  # noqa: N818  (a control-flow signal, like unittest.SkipTest)
    """Raised by a check that has nothing to look at in this task (no bench, a contract
    that allows what it checks); the message is the reason. Status ``skip``."""


class NotJudged(Skip):
    """Raised by a check that could not look here although there is something to look at
    (it needs a GPU, a tool is missing, no derived case fits the CPU budget). Status
    ``skip`` as the contract says, and the report lists it in ``not_judged``."""


def status_of(findings: list[Finding]) -> str:
    """The worst severity among ``findings`` as a check status (``pass`` when none fail/warn)."""
    worst = max((_RANK[f.severity] for f in findings), default=0)
    return {0: "pass", 1: "warn", 2: "fail"}[worst]


#: when a check runs: ``parallel`` with the others; ``exclusive`` alone, after them (timing:
#: nothing else may load the machine); ``after`` last, with every other check's result in
#: ``ctx.results`` (a check that judges what the battery observed).
Phase = Literal["parallel", "exclusive", "after"]
PHASES: tuple[Phase, ...] = ("parallel", "exclusive", "after")

#: the entry-point group third-party checks register under (``[project.entry-points."kws.checks"]``).
ENTRY_POINT_GROUP = "kws.checks"
#: the package of built-in checks, loaded like a plugin (by name, never imported statically).
BUILTIN_CHECKS = "workstation.checks"


class Check:
    """Base class of a check. Subclasses set :attr:`id`, :attr:`title`, :attr:`order`, a
    docstring (what it catches, how, the public source of the defect class, limits on CPU
    vs GPU) and implement :meth:`run`.

    Attributes:
        id: the check id (task format v1, "Check ids", or a new documented id).
        title: a short title for tables.
        order: position in reports (ascending): the contract's table order for its ids
            (1..21); new ids use higher numbers.
        phase: see :data:`Phase`.
        kinds: task kinds the check is scheduled for (empty: every kind), so a kind-specific
            check never changes another kind's ``complete`` (see :meth:`applies`).
        timing_evidence: its findings carry the timing evidence the review screen plots.
    """

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    order: ClassVar[float] = 1000.0
    phase: ClassVar[Phase] = "parallel"
    kinds: ClassVar[tuple[str, ...]] = ()
    timing_evidence: ClassVar[bool] = False

    @classmethod
    def skip_reason(cls, task: Task) -> str:
        """Why this check has nothing to judge on ``task``, read from the task's declarations
        alone (no task code runs), or ``""`` when it may have. Unlike :meth:`applies` the
        check stays in the battery: the engine reports it as ``skip`` with this reason
        without calling :meth:`run`; ``kws screen`` uses it to give the
        node to a task's timing checks only when one of them has work (docs/screen.md).
        Override only for a reason :meth:`run` would raise as its first :class:`Skip`."""
        return ""

    def run(self, ctx: CheckContext) -> list[Finding]:
        """Judge the task; return findings. Raise :class:`Skip` to skip with a reason."""
        raise NotImplementedError

    @classmethod
    def applies(cls, task: Task) -> str:
        """Why the check has nothing to look at in ``task`` ("" when it has): the default
        battery leaves such a check out (so a task's ``complete`` reports only checks that
        could look), and ``--only`` asking for it gets ``skip`` with this reason. The
        default tests :attr:`kinds`."""
        if cls.kinds and task.kind not in cls.kinds:
            return f"only for {' / '.join(cls.kinds)} tasks; this one is {task.kind}"
        return ""

    def after_all(self, ctx: CheckContext) -> list[Finding]:
        """Findings about the end state, once every check of the run has finished (e.g. the
        task folder changed on disk). Called only when :meth:`run` returned findings."""
        return []

    def finding(self, ctx: CheckContext, severity: str, summary: str, evidence: dict[str, Any] | None = None,
                *, case: dict[str, Any] | None = None, seed: int | None = None) -> Finding:
        """A finding of this check with a repro command for ``case``/``seed``."""
        return Finding(self.id, severity, summary, evidence or {}, ctx.repro(self.id, case, seed))


class RegistryError(Exception):
    """A check that cannot be registered: no id, an unknown phase, or an id another class
    already holds."""


REGISTRY: dict[str, type[Check]] = {}
#: entry points of :data:`ENTRY_POINT_GROUP` that failed to load: ``"name (value): error"``.
PLUGIN_ERRORS: list[str] = []
_loaded = False
_load_lock = threading.Lock()


def register(cls: type[Check]) -> type[Check]:
    """Class decorator: add a check to the registry.

    Re-registering the same class (the same module and qualified name, e.g. a module
    imported again) replaces the entry.

    Raises:
        RegistryError: no id, an unknown phase, or a different class holds the id.
    """
    if not cls.id:
        raise RegistryError(f"{cls.__module__}.{cls.__qualname__} has no id")
    if cls.phase not in PHASES:
        raise RegistryError(f"{cls.__qualname__}: unknown phase {cls.phase!r}; expected one of {', '.join(PHASES)}")
    old = REGISTRY.get(cls.id)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise RegistryError(f"check id {cls.id!r} is taken by {old.__module__}.{old.__qualname__}; "
                            f"{cls.__module__}.{cls.__qualname__} cannot register it too")
    REGISTRY[cls.id] = cls
    return cls


def load_checks() -> None:
    """Import every built-in check module and every ``kws.checks`` entry point (once).

    A built-in module that fails to import is a kws bug and raises; a third-party entry
    point that fails is recorded in :data:`PLUGIN_ERRORS` (``kws check`` prints it) and the
    rest of the battery still loads.
    """
    global _loaded
    with _load_lock:
        if _loaded:
            return
        builtin = importlib.import_module(BUILTIN_CHECKS)
        for info in pkgutil.iter_modules(builtin.__path__):
            if not info.ispkg and not info.name.startswith("_"):
                importlib.import_module(f"{builtin.__name__}.{info.name}")
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as e:  # noqa: BLE001  (a broken plugin must not take the battery down)
                PLUGIN_ERRORS.append(f"{ep.name} ({ep.value}): {type(e).__name__}: {e}")
        _loaded = True


_ID_RE = re.compile(r'^    id = "([a-z0-9][a-z0-9-]*)"\s*(?:#.*)?$', re.M)


def known_check_ids() -> set[str]:
    """Every check id the battery registers, without importing the built-in check modules:
    their ``id = "..."`` class attributes read from the sources (a test checks this equals
    the registry), plus the ids of ``kws.checks`` plugins (loaded when there are any). For
    callers that only validate ids (the rubric loader in the review app's process, which
    would otherwise import numpy and every check before its first paint)."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    if _loaded:
        return set(REGISTRY)
    spec = find_spec(BUILTIN_CHECKS)
    ids: set[str] = set()
    for folder in spec.submodule_search_locations or [] if spec is not None else []:
        for path in sorted(Path(folder).glob("*.py")):
            if not path.name.startswith("_"):
                ids.update(_ID_RE.findall(path.read_text(encoding="utf-8")))
    if entry_points(group=ENTRY_POINT_GROUP):
        load_checks()
        ids |= set(REGISTRY)
    return ids


def check_ids() -> list[str]:
    """Every registered check id in report order (:attr:`Check.order`, then id)."""
    load_checks()
    return sorted(REGISTRY, key=lambda i: (REGISTRY[i].order, i))


def check_class(check_id: str) -> type[Check]:
    """The registered class of ``check_id``.

    Raises:
        KeyError: no such check.
    """
    load_checks()
    return REGISTRY[check_id]


def ids_where(*, phase: Phase | None = None, timing_evidence: bool | None = None,
              among: Iterable[str] | None = None) -> list[str]:
    """Registered ids (in report order, optionally only ``among``) whose class matches."""
    pool = check_ids() if among is None else [i for i in check_ids() if i in set(among)]
    return [i for i in pool
            if (phase is None or REGISTRY[i].phase == phase)
            and (timing_evidence is None or REGISTRY[i].timing_evidence == timing_evidence)]
