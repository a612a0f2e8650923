"""``[inputs] keep_structure``, checked against the inputs ``make_inputs`` returns.

task.toml can only say which input indices keep their structure; how many inputs there are
is known once ``make_inputs`` has run (in a child). The value checks that honour the list
(``special-values``, ``degenerate-inputs``) read it through :func:`kept_inputs`, which
compares it with the inputs a call step described (``extra.inputs``, one entry per
positional input) and refuses to judge with a task problem naming task.toml when an index
is beyond them: a typo there would otherwise silently keep nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from workstation.engine.check import TaskProblem
from workstation.engine.context import CallOutcome, CheckContext, case_label
from workstation.protocol.extras.calls import CallExtra


def kept_inputs(ctx: CheckContext, outcomes: Iterable[tuple[dict[str, Any], CallOutcome]]) -> set[int]:
    """The input indices of ``[inputs] keep_structure``, after checking each against the
    number of inputs of every (case, outcome) in ``outcomes`` whose call step returned (and
    so described its inputs).

    Raises:
        TaskProblem: (``task.toml``) an index is at or beyond the number of inputs
            ``make_inputs`` returned for one of those cases.
    """
    keep = tuple(int(i) for i in ctx.task.extensions.keep_structure)
    if not keep:
        return set()
    for case, out in outcomes:
        if out.step is None or not out.ok:
            continue  # a call that raised (or died) described no inputs
        ins = out.payload(CallExtra).inputs
        beyond = sorted(i for i in keep if i >= len(ins))
        if beyond:
            raise TaskProblem(
                "task.toml",
                f"[inputs] keep_structure = {list(keep)}: index {beyond[0]} is beyond the {len(ins)} input(s) "
                f"make_inputs returns for case {case_label(dict(case))} (indices start at 0)")
    return set(keep)
