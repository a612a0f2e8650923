"""Handlers of the task-level parts of step results: a library the task imports is not
installed here (:class:`~workstation.protocol.results.MissingModule`), a task-format problem
only a job child sees (:class:`~workstation.protocol.results.TaskFormat`), and the seconds
each task file's import took (the report's ``imports`` extension)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workstation.engine.check import NotJudged, TaskProblem
from workstation.engine.payloads import on_cause, on_every_step
from workstation.protocol.results import MissingModule, TaskFormat
from workstation.protocol.steps import Step, principal
from workstation.task.backends import library_hint

if TYPE_CHECKING:
    from workstation.engine.context import CallOutcome, CheckContext
    from workstation.protocol.wire import StepResult

#: most task files one report's ``imports`` table lists.
MAX_IMPORT_ROWS = 50


@on_cause(MissingModule)
def missing_module(ctx: CheckContext, o: CallOutcome, miss: MissingModule) -> None:
    """A module no folder of the job's ``sys.path`` has (``found`` False: a library not
    installed here, not a typo of a submodule of one that is): the role's code cannot run on
    this machine, so the check is not judged, naming the module, the file and the install
    hint; later jobs of that role are refused with the same reason.

    Raises:
        NotJudged: the library is not installed (nothing when ``found``: then the import
            error is the task code's own).
    """
    if miss.found:
        return
    who = principal(o.spec)
    top = miss.top or miss.name
    name = miss.name or top
    by = f" ({name!r}, imported by {miss.importer})" if miss.importer else f" ({name!r})"
    why = f"{top} is not installed here{by}: {library_hint(top)}; the {who}'s code cannot run, so this is not judged"
    ctx.refuse_role(who, why)
    raise NotJudged(why)


@on_cause(TaskFormat)
def task_format(ctx: CheckContext, o: CallOutcome, tf: TaskFormat) -> None:
    """A task-format problem a job child found (``out_args`` beyond the inputs on any case;
    a declared case over the input budget): the task is broken, not a role. A derived case
    over the budget is kws's own choice and stays a failed call (kws drops such cases).

    Raises:
        TaskProblem: naming task.toml and the key.
    """
    case = getattr(o.spec, "case", None)
    if tf.key == "cases" and case is not None and dict(case) not in [dict(c) for c in ctx.task.cases]:
        return
    raise TaskProblem("task.toml", f"{tf.key}: {o.error.message if o.error is not None else ''}")


@on_every_step
def imports(ctx: CheckContext, spec: Step, st: StepResult) -> None:
    """Put the task-file imports a step reported into the report's ``imports`` extension: per
    file, the largest CPU and wall seconds one job took to import it, and how many jobs
    imported it (at most :data:`MAX_IMPORT_ROWS` files)."""
    if not st.imports:
        return

    def merge(table: dict[str, dict[str, float | int]]) -> None:
        for name, t in list(st.imports.items())[:MAX_IMPORT_ROWS]:
            row = table.setdefault(str(name)[:200], {"cpu_s": 0.0, "wall_s": 0.0, "jobs": 0})
            row["cpu_s"] = round(max(float(row["cpu_s"]), t.cpu_s), 3)
            row["wall_s"] = round(max(float(row["wall_s"]), t.wall_s), 3)
            row["jobs"] = int(row["jobs"]) + 1

    ctx.update_report("imports", merge)
