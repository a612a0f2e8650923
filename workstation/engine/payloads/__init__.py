"""The parent's handlers of the typed parts of a step's result, one per kind.

A step's result (:class:`workstation.protocol.wire.StepResult`) carries, besides the step
kind's own payload, parts any step may send (:mod:`workstation.protocol.results`):

- an error's *causes* (:data:`~workstation.protocol.results.Cause`): a library that is not
  installed, a limit of the device stand-in or of the CUDA emulation, a task-format problem.
  Their handlers decide what the cause means for the checks that met it: refuse to judge
  (:class:`~workstation.engine.check.NotJudged`, remembered for the role so its later jobs
  are refused at once) or blame the task (:class:`~workstation.engine.check.TaskProblem`).
- *notes* (:data:`~workstation.protocol.results.Note`) and the imports' seconds: what a
  backend layer observed, written into the report's extension keys.

Handlers register with :func:`on_cause` / :func:`on_note`, the way the harness registers
``@step`` handlers, in one module per backend concern (:mod:`.task`, :mod:`.standin`,
:mod:`.cuda_emulation`); :class:`~workstation.engine.context.CheckContext` calls
:func:`judge_causes` on every outcome and :func:`take_notes` on every step result, and knows
nothing of any backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from workstation.protocol.results import Cause, Note
from workstation.protocol.steps import Step

if TYPE_CHECKING:
    from workstation.engine.context import CallOutcome, CheckContext
    from workstation.protocol.wire import StepResult

#: cause type -> ``fn(ctx, outcome, cause)``: may raise NotJudged / TaskProblem.
CAUSES: dict[type, Callable[[CheckContext, CallOutcome, Any], None]] = {}
#: note type -> ``fn(ctx, step, note)``: writes the report's extension keys.
NOTES: dict[type, Callable[[CheckContext, Step, Any], None]] = {}
#: ``fn(ctx, step, result)`` called for every step result (the imports' seconds).
EVERY_STEP: list[Callable[[CheckContext, Step, StepResult], None]] = []

F = TypeVar("F", bound=Callable[..., None])


def on_cause(kind: type) -> Callable[[F], F]:
    """Register the handler of error causes of type ``kind``.

    Raises:
        ValueError: ``kind`` is not a member of :data:`~workstation.protocol.results.Cause`,
            or already has a handler.
    """
    return _register(CAUSES, kind, Cause)


def on_note(kind: type) -> Callable[[F], F]:
    """Register the handler of notes of type ``kind``.

    Raises:
        ValueError: ``kind`` is not a member of :data:`~workstation.protocol.results.Note`,
            or already has a handler.
    """
    return _register(NOTES, kind, Note)


def on_every_step(fn: F) -> F:
    """Register ``fn(ctx, step, result)``, called for every step result."""
    EVERY_STEP.append(fn)
    return fn


def _register(table: dict[type, Any], kind: type, union: Any) -> Callable[[F], F]:
    members = getattr(union, "__args__", ())
    if kind not in members:
        raise ValueError(f"{kind.__qualname__} is not a kind of {union}")
    if kind in table:
        raise ValueError(f"{kind.__qualname__} already has a handler ({table[kind].__qualname__})")

    def deco(fn: F) -> F:
        table[kind] = fn
        return fn

    return deco


def judge_causes(ctx: CheckContext, outcomes: list[CallOutcome]) -> None:
    """Run the cause handlers on every outcome's error, in order (the first that raises
    decides)."""
    for o in outcomes:
        err = o.error
        if err is None:
            continue
        for cause in err.causes:
            handler = CAUSES.get(type(cause))
            if handler is not None:
                handler(ctx, o, cause)


def take_notes(ctx: CheckContext, steps: list[Step], results: list[StepResult | None]) -> None:
    """Run the note handlers (and :data:`EVERY_STEP`) on each step result of a job."""
    for spec, st in zip(steps, results, strict=False):
        if st is None:
            continue
        for fn in EVERY_STEP:
            fn(ctx, spec, st)
        for note in st.notes:
            handler = NOTES.get(type(note))
            if handler is not None:
                handler(ctx, spec, note)


def _load() -> None:
    """Import the handler modules (they register at import)."""
    from workstation.engine.payloads import cuda_emulation, standin, task  # noqa: F401


def missing(kinds: tuple[type, ...], table: dict[type, Any]) -> list[str]:
    """The kinds of ``kinds`` without a handler in ``table`` (tests/test_payloads.py asks
    that none is missing)."""
    return [k.__qualname__ for k in kinds if k not in table]


_load()
