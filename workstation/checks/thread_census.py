"""``thread-census``: threads the candidate leaves running after a call returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from workstation.checks.support.series import run_series, series_failure, series_payload
from workstation.checks.support.suspicion import suspect
from workstation.engine.check import Check, Finding, register
from workstation.engine.context import CheckContext, case_label
from workstation.protocol.extras.series import SeriesThread


def thread_text(t: SeriesThread) -> str:
    """One thread in words: ``daemon thread 'Thread-3 (fill)' (candidate.fill), started at candidate.py:12``."""
    site = next((f for f in reversed(t.started_at) if "threading.py" not in f.file), None)
    where = f", started at {site.file.rsplit('/', 1)[-1]}:{site.line}" if site else ""
    return (f"{'daemon ' if t.daemon else ''}thread {t.name!r}"
            + (f" ({t.target})" if t.target else "") + where)


@dataclass(frozen=True)
class _Seen:
    """A new thread alive right after serial call ``call`` (1-based) returned; ``alive_after_wait``:
    still alive after the synchronize + wait."""

    thread: SeriesThread
    call: int
    alive_after_wait: bool

    def evidence(self) -> dict[str, Any]:
        """The thread as a finding's evidence shows it: its payload's keys, ``call``,
        ``alive_after_wait``."""
        return {**msgspec.to_builtins(self.thread), "call": self.call, "alive_after_wait": self.alive_after_wait}


@register
class ThreadCensus(Check):
    """Threads the candidate leaves running after a call returns.

    Catches:
        a candidate that returns while a thread it started still runs: a background
        thread that finishes (or fakes) the result after the timer stopped, a worker that
        writes outputs late, threads leaked on every call. SOL-ExecBench counts threads
        before and after the call for this reason.

    How:
        the shared `call_series` step (`workstation.harness.series`): around each of the
        12 serial calls on the first declared case, the Python threads (`threading.enumerate`,
        with the stack that started each, recorded by wrapping `threading.Thread.start` during
        the call, its target and the frames it is running) and the OS threads
        (`/proc/self/task`: native threads too) are counted before the call, right after it
        returns, and after a synchronize, a 20 ms wait and a second synchronize. A thread is
        the candidate's when a task file called its `start` itself (not through a library's
        pool), holds its target, or is on the stack it is running.

    Findings:
        | finding | severity |
        |---|---|
        | a Python thread of the candidate's still alive after the call returned (name, target, where it was started, its stack; whether it outlived the wait) | `fail` |
        | a new Python thread started by library code on a later call still alive after the wait; OS threads that grow on every later call (a leak): threads left running that kws cannot attribute to the candidate | `warn`, not judged |
        | threads started by libraries on the first call (a runtime's pool), the counts | `info` |

    Example:
        (a candidate that fills its output from a thread): `case N=64 float32: serial
        call 1 returned while daemon thread 'Thread-1 (fill)' (candidate.fill), started at
        candidate.py:9, was still running`.

    Source:
        NVIDIA SOL-ExecBench `src/sol_execbench/core/bench/reward_hack.py` (a thread count
        before and after the call); GPU MODE reference-kernels PR #159-#162 (work finishing
        after the timed call).

    Limits:
        the timer's identity (`time.perf_counter`, `time.time`, `torch.cuda.synchronize`,
        `torch.cuda.Event.elapsed_time` patched: METR's report) is judged by `tampering`,
        which snapshots every callable of those namespaces before the candidate's import and
        after its call, and so are CUDA streams created during a call; this check does not
        repeat them. A native thread started by task code is counted but not attributed (no
        Python stack); it is reported only when the count grows on every later call.

    Not judged when:
        the plain call of the first case fails (correctness judges it), or the series was
        stopped by kws's CPU budget or a limit that says nothing about the candidate:
        `NotJudged`. A series that raised partway is judged on the calls that completed. A thread
        left running that is not attributed to the candidate (library code started it on a later
        call; native threads growing) is a `warn` tagged `after-return` and the check is not
        judged (one rule for suspicion: a hack-class signal kws could not confirm is not judged, never a `warn` in a report that exits 0).

    Forgeable:
        Measured in the job process: `threading.enumerate`, `sys._current_frames` and `/proc/self/task` read by the harness.
        Still forgeable from inside: a thread removed from `threading._active`, or started through `_thread.start_new_thread` (seen only as an OS thread).
    """

    id = "thread-census"
    order = 52
    title = "Threads left running"

    def run(self, ctx: CheckContext) -> list[Finding]:
        spec, out = run_series(ctx)
        case = spec.case
        label = case_label(case)
        serial = series_payload(out).serial
        findings: list[Finding] = []
        if not out.ok and not serial:
            ctx.could_not_judge(f"case {label}: {series_failure(spec, out)}; no call of the series completed")
            return findings
        mine: list[_Seen] = []
        lib_later: list[_Seen] = []
        lib_first: list[_Seen] = []
        for row in serial:
            k = row.call
            settled = {t.ident for t in row.threads_after_settle}
            for th in row.threads_after_return:
                item = _Seen(thread=th, call=k + 1, alive_after_wait=th.ident in settled)
                if th.task_code:
                    mine.append(item)
                elif not item.alive_after_wait:
                    continue
                elif k == 0:
                    lib_first.append(item)
                else:
                    lib_later.append(item)
        counts = [r.os_threads for r in serial]
        growth = [c[2] - c[0] for c in counts[1:] if len(c) == 3 and min(c) >= 0]
        if mine:
            t = mine[0]
            calls = sorted({m.call for m in mine})
            findings.append(self.finding(
                ctx, "fail",
                f"case {label}: serial call {t.call} returned while {thread_text(t.thread)} was still running"
                + (" (and still after the synchronize + wait)" if t.alive_after_wait else "")
                + (f"; the same after call(s) {', '.join(map(str, calls[1:8]))}" if len(calls) > 1 else "")
                + ": work of the candidate continues after it returns (outside any timer)",
                {"case": case, "seed": spec.seed_a, "threads": [m.evidence() for m in mine[:8]],
                 "calls_with_threads": calls, **_source(t.thread)}, case=case, seed=spec.seed_a))
        if lib_later:
            t = lib_later[0]
            text = (f"case {label}: serial call {t.call} left {thread_text(t.thread)} running after the "
                    "synchronize + wait (started by library code on a call after the first)")
            findings.append(self.finding(
                ctx, "warn", text, {"case": case, "threads": [m.evidence() for m in lib_later[:8]],
                                    **suspect(ctx, "after-return", text)}, case=case, seed=spec.seed_a))
        if len(growth) >= 3 and all(g > 0 for g in growth):
            text = (f"case {label}: the process's OS threads grow on every call after the first "
                    f"({', '.join(f'+{g}' for g in growth[:8])}): native threads leak or keep running after return")
            findings.append(self.finding(
                ctx, "warn", text, {"case": case, "os_threads": counts, **suspect(ctx, "after-return", text)},
                case=case, seed=spec.seed_a))
        if not out.ok:
            ctx.could_not_judge(f"case {label}: {series_failure(spec, out)}; the rest of the series was not examined")
        if not any(f.severity in ("fail", "warn") for f in findings):
            findings.append(self.finding(
                ctx, "info",
                f"case {label}: no thread of the candidate's left running after {len(serial)} calls; OS threads "
                f"before/after return/after the wait per call: {counts[:3]}{' ...' if len(counts) > 3 else ''}"
                + (f"; library threads started on the first call: "
                   f"{', '.join(thread_text(m.thread) for m in lib_first[:3])}" if lib_first else "")
                + "; timers and CUDA streams: see tampering",
                {"case": case, "seed": spec.seed_a, "os_threads": counts,
                 "library_threads": [m.evidence() for m in lib_first[:8]]}))
        return findings


def _source(t: SeriesThread) -> dict[str, Any]:
    """``{"source": {file, line}}`` of the task frame that started ``t`` (empty when none)."""
    for f in reversed(t.started_at):
        if "/tasks/" in f.file or f.file.endswith(".py") and "site-packages" not in f.file \
                and "threading.py" not in f.file and "/workstation/" not in f.file:
            return {"source": {"file": f.file.rsplit("/", 1)[-1], "line": f.line}}
    return {}
