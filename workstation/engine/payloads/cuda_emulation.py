"""Handlers of kws's CPU emulation of CUDA (docs/backends.md, "CUDA on a CPU"): a construct
it does not run (:class:`~workstation.protocol.results.CudaEmulationLimit`) and the
extensions it built (:class:`~workstation.protocol.results.CudaEmulationBuilds`, the
report's ``cuda_emulation`` extension)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workstation.engine.check import NotJudged
from workstation.engine.payloads import on_cause, on_note
from workstation.protocol.results import CudaEmulationBuilds, CudaEmulationLimit
from workstation.protocol.steps import Step, principal
from workstation.schema.text import safe_text
from workstation.task.backends import CUDA_EMULATION_NOTE

if TYPE_CHECKING:
    from workstation.engine.context import CallOutcome, CheckContext

#: most builds, and launch sites per build, one report lists.
MAX_BUILDS = 20
MAX_LAUNCHES = 20


@on_cause(CudaEmulationLimit)
def emulation_limit(ctx: CheckContext, o: CallOutcome, limit: CudaEmulationLimit) -> None:
    """The role's CUDA extension uses what the emulation does not run: not judged here
    (later jobs of the role are refused with the reason); cuda-build still reads it
    statically.

    Raises:
        NotJudged: always.
    """
    who = principal(o.spec)
    why = (f"the {who}'s CUDA extension cannot run under kws's CPU emulation of CUDA: {safe_text(limit.why, 600)}; "
           "so this is not judged (docs/backends.md, 'CUDA on a CPU'; cuda-build still reads it statically)")
    ctx.refuse_role(who, why)
    raise NotJudged(why)


@on_note(CudaEmulationBuilds)
def emulated_builds(ctx: CheckContext, spec: Step, note: CudaEmulationBuilds) -> None:
    """Put the CUDA extensions built or loaded under the emulation into the report's
    ``cuda_emulation`` extension: what the emulation runs and what it does not
    (``emulated``), and per extension and principal whether it was compiled (``compiled_s``:
    g++ seconds) or taken from the run's cache, its launch sites and whether its blocks ran
    as fibers (barriers, shuffles)."""
    who = principal(spec)

    def merge(table: dict[str, Any]) -> None:
        if not table:
            table.update({"emulated": CUDA_EMULATION_NOTE, "builds": {}})
        for b in note.builds[:MAX_BUILDS]:
            name = safe_text(b.name, 200)
            row = table["builds"].setdefault(name, {"by": [], "compiled_s": [], "launches": [], "fibers": False})
            if who not in row["by"]:
                row["by"].append(who)
            if not b.cached and b.seconds is not None:
                row["compiled_s"].append(round(float(b.seconds), 2))
            row["fibers"] = bool(row["fibers"] or b.fibers)
            if not row["launches"]:
                row["launches"] = [f"line {x.line}: {safe_text(x.kernel, 120)}<<<"
                                   f"{safe_text(', '.join(x.config), 200)}>>>" for x in b.launches[:MAX_LAUNCHES]]

    ctx.update_report("cuda_emulation", merge)
