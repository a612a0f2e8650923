"""The check unit: an id, a docstring saying what it catches, and ``run`` returning findings.

A check never runs task code itself: it asks its :class:`~workstation.engine.run.CheckContext`
to run steps in isolated children and judges the data that comes back. Severities and
statuses are the contract's (``shared/spec/task-format.md``):

- finding severity: ``fail`` (the task does not hold up on this point), ``warn`` (a
  reviewer must look), ``info``;
- check status: the worst finding's severity (``pass`` when none), ``skip`` (with the
  reason: e.g. needs a GPU), ``error`` (the check itself broke: a bug in kws).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from workstation.engine.context import CheckContext

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

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "seconds": round(self.seconds, 3),
                "reason": self.reason}


class Skip(Exception):  # noqa: N818  (a control-flow signal, like unittest.SkipTest)
    """Raised by a check that cannot look at this task here; the message is the reason."""


def status_of(findings: list[Finding]) -> str:
    """The worst severity among ``findings`` as a check status (``pass`` when none fail/warn)."""
    worst = max((_RANK[f.severity] for f in findings), default=0)
    return {0: "pass", 1: "warn", 2: "fail"}[worst]


class Check:
    """Base class of a check. Subclasses set :attr:`id` (a contract check id),
    :attr:`title`, a docstring (what it catches, how, the public source of the defect
    class, limits on CPU vs GPU) and implement :meth:`run`.

    ``exclusive`` checks (timing) run alone, after the others, never beside another job.
    """

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    exclusive: ClassVar[bool] = False

    def run(self, ctx: CheckContext) -> list[Finding]:
        """Judge the task; return findings. Raise :class:`Skip` to skip with a reason."""
        raise NotImplementedError

    def finding(self, ctx: CheckContext, severity: str, summary: str, evidence: dict[str, Any] | None = None,
                *, case: dict[str, Any] | None = None, seed: int | None = None) -> Finding:
        """A finding of this check with a repro command for ``case``/``seed``."""
        return Finding(self.id, severity, summary, evidence or {}, ctx.repro(self.id, case, seed))


REGISTRY: dict[str, type[Check]] = {}


def register(cls: type[Check]) -> type[Check]:
    """Class decorator: add a check to the battery (order of registration = report order)."""
    if not cls.id:
        raise ValueError(f"{cls.__name__} has no id")
    REGISTRY[cls.id] = cls
    return cls
