"""Handlers of kws's CPU device stand-in (docs/backends.md, "Device stand-in"): a GPU
feature it cannot answer (:class:`~workstation.protocol.results.DeviceStandinLimit`) and the
probes task code called (:class:`~workstation.protocol.results.StandinCalls`, the report's
``device_standin`` extension)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workstation.engine.check import NotJudged
from workstation.engine.payloads import on_cause, on_note
from workstation.protocol.devices import DEFAULT_TARGET, DEVICE_TARGETS, device_target
from workstation.protocol.results import DeviceStandinLimit, StandinCalls
from workstation.protocol.steps import Step, principal
from workstation.schema.text import safe_text

if TYPE_CHECKING:
    from workstation.engine.context import CallOutcome, CheckContext

#: most probes one report's ``device_standin.called`` table lists.
MAX_PROBES = 100


@on_cause(DeviceStandinLimit)
def standin_limit(ctx: CheckContext, o: CallOutcome, limit: DeviceStandinLimit) -> None:
    """The role's code needs a GPU beyond what the stand-in answers: it cannot run here, so
    the check is not judged (and later jobs of the role are refused with the reason).

    Raises:
        NotJudged: always.
    """
    who = principal(o.spec)
    why = (f"the {who}'s code needs a GPU beyond what kws's CPU device stand-in answers: "
           f"{safe_text(limit.why, 400)}; it cannot run here, so this is not judged (docs/backends.md, "
           "'Device stand-in')")
    ctx.refuse_role(who, why)
    raise NotJudged(why)


@on_note(StandinCalls)
def standin_calls(ctx: CheckContext, spec: Step, note: StandinCalls) -> None:
    """Put what the stand-in answered into the report's ``device_standin`` extension: the
    target, the values it answers (:mod:`workstation.protocol.devices`) and, per probe task
    code called, the calls and the principals (reference, candidate, ...) whose jobs called
    it."""
    name = note.target if note.target in DEVICE_TARGETS else None
    who = principal(spec)

    def merge(table: dict[str, Any]) -> None:
        if not table:
            table.update({"target": name or DEFAULT_TARGET, "answers": device_target(name).as_dict(), "called": {}})
        called = table["called"]
        for probe, n in list(note.calls.items())[:MAX_PROBES]:
            row = called.setdefault(str(probe)[:200], {"calls": 0, "by": []})
            row["calls"] += n
            if who not in row["by"]:
                row["by"].append(who)

    ctx.update_report("device_standin", merge)
