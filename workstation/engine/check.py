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

Two kinds of ``skip``: :class:`Skip` says the check had nothing to look at (no bench, no
claim); :class:`NotJudged` says it had something to look at and could not (a step killed at a
limit, an import that failed, a missing tool, a backend that cannot run here). A check that
judged part of the task and could not judge another part that could have produced a ``fail``
says so with :meth:`CheckContext.could_not_judge` (on the check's own view of the context: a
check holds no per-run state) and returns what it observed: the report lists it
under ``not_judged``, and it is never ``pass`` (its status is ``skip`` unless a finding is
``warn`` or ``fail``). ``kws check`` exits 4 when a check is not judged and none fails.

The registry follows pytest's plugin model: the engine defines what a check is and runs
whatever registered; it never imports a check module by name. :func:`load_checks` imports
every module of the :mod:`workstation.checks` package and every entry point of the
``kws.checks`` group (a team's own checks, shipped as a package), and each module registers
its class with :func:`register`. A check id is declared once, on its class; report order
comes from the class's :attr:`Check.order` (the contract's check-id table order; new ids
after), and every other place that needs ids (the rubric's ``informed_by`` validation, the
TUI's timing panel, ``--only``) asks the registry. A plugin that fails to load is kept in
:data:`PLUGIN_ERRORS` (its entry point, distribution, version and error) and the battery runs
without it; the report names it (``plugin_errors``) as well as every loaded plugin and its ids
(``plugins``). The built-in ids are also in a manifest generated from the classes
(``workstation/checks/manifest.json``, by ``scripts/gen_checks_doc.py`` together with
docs/checks.md), so :func:`known_check_ids` can answer without importing a check module.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
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
    #: where its time went (:class:`workstation.engine.costs.CheckCost`'s ``as_dict``);
    #: a kws extension of the contract's check entry, absent when not measured.
    timings: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"check": self.check, "status": self.status, "seconds": round(self.seconds, 3),
                             "reason": self.reason}
        if self.timings is not None:
            d["timings"] = dict(self.timings)
        return d


class Skip(Exception):  # a control-flow signal, like unittest.SkipTest
    """Raised by a check that has nothing to look at in this task (no bench, a contract
    that allows what it checks); the message is the reason. Status ``skip``."""


class NotJudged(Skip):
    """Raised by a check that could not look here although there is something to look at
    (it needs a GPU, a tool is missing, no derived case fits the CPU budget). Status
    ``skip`` as the contract says, and the report lists it in ``not_judged``."""


class TaskProblem(NotJudged):
    """Raised (by :class:`~workstation.engine.context.CheckContext`) when task code other
    than the candidate broke the contract where it must work: ``make_inputs`` raised or
    returned what the contract does not allow on a declared case, the reference raised on a
    declared case or returned non-finite values for finite inputs the contract does not let
    it; also a task-format problem only a job child sees. The check that met it could not
    judge the candidate: status ``skip``, listed in ``not_judged`` with the file to blame.

    Attributes:
        file: the task file and callable at fault (``inputs.py:make_inputs``,
            ``reference.py:rmsnorm``, ``task.toml``).
        problem: what is wrong, one line.
    """

    def __init__(self, file: str, problem: str):
        self.file = file
        self.problem = problem
        super().__init__(f"the task is broken, not the candidate: {file}: {problem}")


def status_of(findings: list[Finding], *, not_judged: str = "") -> str:
    """The worst severity among ``findings`` as a check status (``pass`` when none fail/warn);
    ``skip`` instead of ``pass`` when a part of the check was ``not_judged`` (a check that
    could not look is never ``pass``)."""
    worst = max((_RANK[f.severity] for f in findings), default=0)
    status = {0: "pass", 1: "warn", 2: "fail"}[worst]
    return "skip" if status == "pass" and not_judged else status


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
    """A check that cannot be registered: no id, an unknown phase, an unknown hook or a hook
    of another signature, or an id another class already holds."""


REGISTRY: dict[str, type[Check]] = {}


@dataclass(frozen=True)
class Plugin:
    """A ``kws.checks`` entry point that loaded, and the check ids it registered.

    Attributes:
        entry_point: the entry point's name (``mine`` in ``mine = "my_pkg.checks"``).
        value: what it names (``my_pkg.checks``).
        distribution: the installed distribution that declares it ("" when unknown).
        version: that distribution's version ("" when unknown).
        checks: the ids its import registered, in report order.
        error: why it failed to load (``"ImportError: ..."``); "" when it loaded.
    """

    entry_point: str
    value: str
    distribution: str
    version: str
    checks: tuple[str, ...] = ()
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The report's object: ``plugins`` entries carry ``checks``, ``plugin_errors``
        entries ``error`` (``kws check --json``, docs/task-format.md)."""
        d: dict[str, Any] = {"entry_point": self.entry_point, "value": self.value,
                             "distribution": self.distribution, "version": self.version}
        if self.error:
            d["error"] = self.error
        else:
            d["checks"] = list(self.checks)
        return d


#: the ``kws.checks`` entry points that loaded, in load order.
PLUGINS: list[Plugin] = []
#: the ``kws.checks`` entry points that failed to load (their checks are not in the battery).
PLUGIN_ERRORS: list[Plugin] = []
_loaded = False
_load_lock = threading.Lock()


#: the hooks a check may define: name -> (how it is bound, its parameters after self/cls).
#: The engine calls exactly these; :func:`register` refuses any other public callable on a
#: check class, and a hook whose binding or parameter names differ (pluggy's
#: ``_verify_hook``): a misspelt hook (``applies_to``) would otherwise never be called.
HOOKS: dict[str, tuple[Literal["method", "classmethod"], tuple[str, ...]]] = {
    "run": ("method", ("ctx",)),
    "after_all": ("method", ("ctx",)),
    "applies": ("classmethod", ("task",)),
    "skip_reason": ("classmethod", ("task",)),
}
#: what a check class declares besides its hooks (attributes and the base's helpers).
_DECLARED = ("id", "title", "order", "phase", "kinds", "timing_evidence")
_HELPERS = ("finding",)


def _verify_hooks(cls: type[Check]) -> None:
    """Refuse a check class whose public callables are not the engine's hooks, or whose hooks
    have another binding or other parameters than :data:`HOOKS` says.

    Raises:
        RegistryError: naming the class, the attribute and what is expected.
    """
    import inspect

    where = f"{cls.__module__}.{cls.__qualname__}"
    for name, value in vars(cls).items():
        if name.startswith("_") or name in _DECLARED:
            continue
        if name in _HELPERS:
            raise RegistryError(f"{where}.{name}: overrides the base class's helper {name!r}, which is not a hook "
                                f"(hooks: {', '.join(HOOKS)})")
        is_callable = isinstance(value, classmethod | staticmethod) or callable(value)
        if name not in HOOKS:
            if is_callable:
                known = ", ".join(f"{h}({', '.join(p)})" for h, (_b, p) in HOOKS.items())
                raise RegistryError(f"{where}.{name}: unknown hook {name!r}; the engine calls only {known}")
            continue
        binding, params = HOOKS[name]
        got = "classmethod" if isinstance(value, classmethod) else \
            "staticmethod" if isinstance(value, staticmethod) else "method"
        if got != binding:
            raise RegistryError(f"{where}.{name}: must be a {binding}, not a {got}")
        fn = value.__func__ if isinstance(value, classmethod) else value
        names = tuple(inspect.signature(fn).parameters)[1:]
        if names != params:
            raise RegistryError(f"{where}.{name}{tuple(names)}: the hook takes ({', '.join(params)})")


def register(cls: type[Check]) -> type[Check]:
    """Class decorator: add a check to the registry, after verifying its hooks
    (:func:`_verify_hooks`).

    Re-registering the same class (the same module and qualified name, e.g. a module
    imported again) replaces the entry.

    Raises:
        RegistryError: no id, an unknown phase, an unknown hook or a hook of another
            signature, or a different class holds the id.
    """
    if not cls.id:
        raise RegistryError(f"{cls.__module__}.{cls.__qualname__} has no id")
    if cls.phase not in PHASES:
        raise RegistryError(f"{cls.__qualname__}: unknown phase {cls.phase!r}; expected one of {', '.join(PHASES)}")
    _verify_hooks(cls)
    old = REGISTRY.get(cls.id)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise RegistryError(f"check id {cls.id!r} is taken by {old.__module__}.{old.__qualname__}; "
                            f"{cls.__module__}.{cls.__qualname__} cannot register it too")
    REGISTRY[cls.id] = cls
    return cls


def load_checks() -> None:
    """Import every built-in check module and every ``kws.checks`` entry point (once).

    A built-in module that fails to import is a kws bug and raises; a third-party entry
    point whose import raises is recorded in :data:`PLUGIN_ERRORS` (with its distribution,
    version and the error; the checks it registered before failing are taken out again), and
    the rest of the battery still loads. ``kws check`` prints those errors and its JSON lists
    them under ``plugin_errors``; the ids each loaded entry point registered are in
    :data:`PLUGINS`.
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
            dist = getattr(ep, "dist", None)
            name = str(dist.metadata["Name"] or "") if dist is not None else ""
            version = str(dist.version or "") if dist is not None else ""
            before = dict(REGISTRY)
            try:
                ep.load()
            except Exception as e:  # noqa: BLE001  (a broken plugin must not take the battery down)
                for cid in set(REGISTRY) - set(before):
                    del REGISTRY[cid]
                PLUGIN_ERRORS.append(Plugin(ep.name, ep.value, name, version, error=f"{type(e).__name__}: {e}"))
                continue
            new = sorted((i for i in REGISTRY if before.get(i) is not REGISTRY[i]),
                         key=lambda i: (REGISTRY[i].order, i))
            PLUGINS.append(Plugin(ep.name, ep.value, name, version, tuple(new)))
        _loaded = True


def plugin_report() -> dict[str, list[dict[str, Any]]]:
    """``{"plugins": [...], "plugin_errors": [...]}`` for the report: every ``kws.checks``
    entry point that loaded (its distribution, version and check ids) and every one that
    failed (the error instead of the ids); both lists are empty when no plugin is
    installed or the checks were not loaded in this process."""
    return {"plugins": [p.as_dict() for p in PLUGINS],
            "plugin_errors": [p.as_dict() for p in PLUGIN_ERRORS]}


#: the manifest of the built-in checks (in the :data:`BUILTIN_CHECKS` package), written by
#: ``scripts/gen_checks_doc.py`` from the registered classes; tests/test_registry.py fails
#: when it differs from the live registry.
MANIFEST = "manifest.json"


def builtin_manifest() -> list[dict[str, Any]]:
    """The built-in checks as the committed manifest lists them, in report order, without
    importing a check module: ``[{"id", "title", "order", "phase", "kinds",
    "timing_evidence", "module"}]``.

    Raises:
        OSError: the manifest is missing (a broken install).
        ValueError: it is not the JSON the generator writes.
    """
    from importlib.resources import files

    doc = json.loads(files(BUILTIN_CHECKS).joinpath(MANIFEST).read_text(encoding="utf-8"))
    checks = doc.get("checks") if isinstance(doc, dict) else None
    if not isinstance(checks, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str)
                                               for c in checks):
        raise ValueError(f"{BUILTIN_CHECKS}/{MANIFEST}: expected {{\"checks\": [{{\"id\": ...}}, ...]}}")
    return checks


def live_manifest() -> list[dict[str, Any]]:
    """What :func:`builtin_manifest` should hold: the registered built-in classes (plugins
    left out), in report order. Loads the checks."""
    load_checks()
    return [{"id": cls.id, "title": cls.title, "order": cls.order, "phase": cls.phase,
             "kinds": list(cls.kinds), "timing_evidence": cls.timing_evidence, "module": cls.__module__}
            for cls in (REGISTRY[i] for i in check_ids())
            if cls.__module__.startswith(BUILTIN_CHECKS + ".")]


def known_check_ids() -> set[str]:
    """Every check id the battery registers, without importing the built-in check modules:
    the built-in ids from :func:`builtin_manifest`, plus the ids of ``kws.checks`` plugins
    (loading the whole battery when any entry point is installed; a plugin that fails to load
    adds no id). For callers that only validate ids (the rubric loader in the review app's
    process, which would otherwise import numpy and every check, about 0.4 s, before its
    first paint)."""
    from importlib.metadata import entry_points

    if _loaded:
        return set(REGISTRY)
    ids = {c["id"] for c in builtin_manifest()}
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
