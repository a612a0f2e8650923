"""``after-return``: outputs stay put after the call returns, and nothing the candidate
started is still running."""

from __future__ import annotations

from typing import Any

from workstation.checks.support.audit import run_audit
from workstation.checks.support.series import changed_elements
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.audit import AuditCall, Proc


def proc_text(p: Proc) -> str:
    """``process 7 (python3, state S, started at candidate.py:31 in add)``."""
    where = ""
    if p.started_at:
        last = p.started_at[-1].rsplit("/", 1)[-1]
        where = f", started at {last}"
    return f"process {p.pid} ({p.comm}, state {p.state}{where})"


@register
class AfterReturn(Check):
    """When the candidate returns, its outputs are final and nothing it started runs on.

    Catches:
        work that continues after the call returns, outside any timer: a forked helper
        process (or its child) that writes the result some milliseconds later, a process left
        running at return, an output that a later call or a background writer changes after
        the caller has it (a ring of reused output buffers, a lazily filled result).

    How:
        the shared invariant audit (see `content-follow`): a census of the job's processes
        (its own pid namespace's `/proc`) before and right after every call, with the Python
        stack that started each process where it was started through Python's API
        (`os.fork`, `os.posix_spawn`, `subprocess.Popen`, so `multiprocessing` too); and the
        outputs of a few early calls, drawn at run time, held by the harness and read again
        at the end of the audit, after every later call, the long run and a settle wait.
        `thread-census` looks at threads; `late-write` at the output right after return.

    Findings:
        | finding | severity |
        |---|---|
        | a process started during a call is alive when it returns, started by task code or outside Python's process API (pid, command, state, the stack that started it) | `fail` |
        | a held output changed after its call returned (which call, how many elements, the first and its two values) | `fail` |
        | a process started by library code (not task code) alive at return | `info` |
        | no process left running and every held output unchanged | `info` |

    Example:
        (a forked helper overwrites the output): `case N=512 float32 (the audit case): call 3
        of 60 returned while process 9 (python3, state S, started at candidate.py:27 in add)
        was still running: work of the candidate continues after it returns`.

    Source:
        GPU MODE and pygpubench cheats that finish the work after the timer stops (threads,
        streams, helper processes); PyTorch's and CUDA's rule that a returned tensor is ready
        for the caller once the stream is synchronized.

    Limits:
        a process that exits before the call returns and leaves no writer behind is not seen
        (and does no harm to the result); a write into an output that happens only after the
        audit ends is not seen.

    Not judged when:
        the audit was not run (see `content-follow`), or `/proc` cannot be read in the job
        (the census part).

    Forgeable:
        Measured in the job process: the harness's census of the job's pid namespace and its re-read of held outputs.
        Still forgeable from inside: a process started by a raw syscall that exits before the call returns and hands its work to a thread of the job (seen by thread-census only if it is a Python thread).
    """

    id = "after-return"
    order = 57
    title = "Outputs stay put; nothing left running"

    def run(self, ctx: CheckContext) -> list[Finding]:
        run = run_audit(ctx)
        case = run.spec.case
        label = f"case {case_label(case)} (the audit case)"
        findings: list[Finding] = []
        if run.extra.census:
            ctx.could_not_judge(f"{label}: the process census could not run ({run.extra.census})")
        mine: list[tuple[AuditCall, Proc]] = []
        lib: list[tuple[AuditCall, Proc]] = []
        for c in run.extra.calls:
            for p in c.new_processes:
                (mine if p.task_code or not p.started_at else lib).append((c, p))
        if mine:
            c, p = mine[0]
            findings.append(self.finding(
                ctx, "fail",
                f"{label}: call {c.index + 1} of {len(run.extra.calls)} returned while {proc_text(p)} was still running"
                + (" (not started through Python's process API)" if not p.started_at else "")
                + f": work of the candidate continues after it returns ({len(mine)} such process(es) in the audit)",
                {"case": case, "call": c.index + 1, "processes": [_proc_ev(cc, pp) for cc, pp in mine[:8]]}, case=case))
        for h in run.extra.held:
            if h.at_end == h.at_return:
                continue
            call = next(c for c in run.extra.calls if c.index == h.call)
            before = run.values(call, h.output)
            after = run.outcome.step.arrays.get(h.array_end) if run.outcome.step is not None and h.array_end else None
            n, idx = (changed_elements(before, after) if before is not None and after is not None else (-1, []))
            first = idx[0] if idx else []
            vals = ([float(before[tuple(first)]), float(after[tuple(first)])]
                    if before is not None and after is not None and (first or before.ndim == 0) else None)
            changed = f"{n} of {before.size} elements" if before is not None and n >= 0 else "its contents"
            findings.append(self.finding(
                ctx, "fail",
                f"{label}: output {h.output} of call {h.call + 1} changed after the call returned: {changed} differ by "
                f"the end of the audit ({len(run.extra.calls) - h.call - 1} calls and a {run.spec.settle_s:g} s wait "
                "later)" + (f", first at {first}: {vals[0]!r} then {vals[1]!r}" if vals else ""),
                {"case": case, "call": h.call + 1, "output": h.output, "changed": n, "first_index": first,
                 "values": vals}, case=case))
            break
        if findings:
            return findings
        held = len(run.extra.held)
        text = f"{label}: no process of the candidate's alive at any of {len(run.extra.calls)} returns"
        if lib:
            text += f" (library processes: {', '.join(proc_text(p) for _c, p in lib[:3])})"
        return [self.finding(ctx, "info", text + f"; {held} held output(s) unchanged at the end",
                             {"case": case, "held": held, "library_processes": [_proc_ev(c, p) for c, p in lib[:8]]},
                             case=case)]


def _proc_ev(c: AuditCall, p: Proc) -> dict[str, Any]:
    return {"call": c.index + 1, "pid": p.pid, "ppid": p.ppid, "comm": p.comm, "state": p.state,
            "started_at": p.started_at[-6:], "task_code": p.task_code}
