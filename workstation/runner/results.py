"""Reading a finished job back: its step results under custody, its output tails, what
ended it (:class:`JobResult`).

Each step's result files are read once, into memory, as hostile input within the job's
byte budget (:func:`workstation.protocol.wire.read_step`), and used only when their bytes
hash to what the fork server recorded when the job handed the step over
(:class:`workstation.protocol.control.Verified`); a step whose hand-over is missing, broken
or shows kws's harness patched is refused (``forged``), never judged.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from workstation.protocol import control
from workstation.protocol.wire import (
    Budget,
    StepResult,
    WireError,
    exists,
    forging_changes,
    read_step,
    read_tail,
)
from workstation.runner import limits

#: bytes of a job's stdout and stderr (and of the fork server's log) kept for the report.
TAIL_BYTES = 8192


@dataclass
class JobResult:
    """What happened to one job.

    ``status``: ``"ok"`` (exited 0 with every step's result), ``"exit"`` (exited before
    reporting every result: non-zero, or 0 from task code's ``os._exit``), ``"signal"``
    (killed by a signal it raised or received, e.g. SIGABRT, SIGSEGV, SIGXFSZ, the memory
    cap's OOM kill, or the fork server ending a job that broke its channel's protocol),
    ``"timeout"`` (killed by kws at a limit), ``"cancelled"`` (killed by kws because the
    caller's ``abandon`` hook said so: ``cancel_reason``).
    ``steps[i]`` is ``None`` for a step that never finished or whose result was refused
    (``forged[i]`` says why); ``died_in_step`` is the step running when the process died
    (or ``None``). ``limit`` names the limit that fired: ``"step"`` (the step's CPU budget,
    ``step_timeout_s``), ``"blocked"`` (the step's wait budget, ``wait_s``: it was blocked
    ``step_blocked_s`` seconds), ``"import"`` (the job's import CPU budget,
    ``import_budget_s``, while importing ``import_file``), ``"wall"`` (the wall-clock
    backstop, :func:`~workstation.runner.limits.wall_backstop`), ``"job"`` (the job's
    wall-clock limit), ``"cancelled"``, ``"channel"`` (the fork server ended it: ``ended``
    says why), ``"memory"``, ``"fsize"`` or ``""``. Only ``"step"`` and ``"blocked"`` say
    the code ran or waited past its budget; ``"wall"``, ``"job"`` and ``"import"`` say
    nothing about a hang. ``cpu_s``: the job's CPU seconds at its last reading
    (``step_cpu_s``: of the step that was running, imports excluded; ``import_cpu_s``: of
    its imports). ``seconds``: wall time of the whole job; ``admission_wait_s``: wall
    seconds it waited for a slot before it started (:mod:`workstation.runner.admission`).
    """

    status: str
    exit_code: int | None
    signal_name: str | None
    steps: list[StepResult | None]
    died_in_step: int | None
    seconds: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timeout_s: float = 0.0
    step_timeout_s: float | None = None
    limit: str = ""
    memory_note: str = ""
    wire_errors: list[str] = field(default_factory=list)
    forged: dict[int, str] = field(default_factory=dict)
    #: what the fork server saw changed after each forged step (the verifier's lines).
    forged_changes: dict[int, list[str]] = field(default_factory=dict)
    cpu_s: float | None = None
    step_cpu_s: float | None = None
    import_cpu_s: float | None = None
    import_budget_s: float | None = None
    import_file: str = ""
    step_blocked_s: float | None = None
    wait_s: float | None = None
    cancel_reason: str = ""
    ended: str = ""
    admission_wait_s: float = 0.0

    @property
    def died(self) -> bool:
        return self.status != "ok"

    def describe_death(self) -> str:
        """One sentence for a job that did not end normally, naming the limit that fired."""
        if self.status == "timeout":
            return self._describe_limit()
        if self.status == "cancelled":
            return f"was stopped by kws: {self.cancel_reason}"
        if self.limit == "channel":
            return f"was ended by kws's fork server: {self.ended}"
        if self.status == "signal":
            extra = ""
            if self.signal_name == "SIGXFSZ":
                extra = f" (wrote more than {limits.STDIO_LIMIT_BYTES // 2**20} MiB to stdout/stderr: the file-size limit)"
            elif self.limit == "memory":
                extra = f" (the kernel's OOM killer at the sandbox's {self.memory_note})"
            # a verb phrase, like the others: it follows a role ("the candidate crashed: ...")
            return f"crashed: its process died from {self.signal_name}{extra}"
        if self.status == "exit":
            return f"ended: its process exited with status {self.exit_code} before reporting a result"
        return "completed"

    def _describe_limit(self) -> str:
        if self.limit == "step" and self.step_timeout_s is not None:
            return (f"did not finish within its {self.step_timeout_s:g} CPU s step budget (KWS_STEP_TIMEOUT) "
                    "and was killed")
        if self.limit == "blocked" and self.wait_s is not None:
            return (f"was blocked for {self.step_blocked_s or 0:.0f} s (off the CPU and not waiting for it: a sleep, "
                    f"a blocked read or wait, a deadlock), over its wait budget of {self.wait_s:g} s, and was killed")
        if self.limit == "import":
            what = f"the import of {self.import_file}" if self.import_file else "the import of a task file"
            return (f"{what} did not finish within the job's {self.import_budget_s or 0:g} CPU s import budget "
                    "(KWS_IMPORT_BUDGET) and was stopped")
        if self.limit == "wall" and self.step_timeout_s is not None:
            used = f" after {self.step_cpu_s:.1f} CPU s" if self.step_cpu_s is not None else ""
            guard = max(self.step_timeout_s, self.wait_s or 0.0)
            return (f"was stopped by the wall-clock backstop ({limits.wall_backstop(guard):g} s for its "
                    f"{self.step_timeout_s:g} CPU s budget, less the time it waited for a busy CPU){used}: kws "
                    "lost track of it (its readings stopped coming); not a hang")
        return f"did not finish within the job's {self.timeout_s:g} s wall-clock limit and was stopped"


@dataclass
class JobEnd:
    """How a job ended, as the runner saw it: ``fired`` (the limit at which kws killed it,
    ``""`` when it exited by itself), ``status`` (the fork server's ``Exited.status``: the
    exit code, or minus the signal; None when no exit was reported), ``oom`` (the memory
    cgroup counted an OOM kill meanwhile), ``seconds`` (wall time of the job), ``timeout``
    (its wall-clock limit) and ``step_timeout`` (the running step's CPU budget);
    ``ended``: why the fork server ended it ("" when it did not); ``cancel_reason``: what
    the ``abandon`` hook said (``fired`` ``"cancelled"``)."""

    fired: str
    status: int | None
    oom: bool
    seconds: float
    timeout: float
    step_timeout: float | None
    ended: str = ""
    cancel_reason: str = ""


_NOT_HANDED_OVER = ("the job did not hand the step over to kws's fork server (task code closed or took over kws's "
                    "channel, or ended the process right after the step)")


def _read_handed_over(i: int, rec: control.Verified, out: Path, out_fd: int, budget: Budget, verify_on: bool,
                      wire_errors: list[str]) -> tuple[StepResult | None, str, list[str]]:
    """Step ``i``'s result under its hand-over record ``rec``: (result, why it is refused or
    ``""``, the changes the fork server saw)."""
    changes = sorted(rec.changes or [])
    try:
        st = read_step(out, i, budget, dir_fd=out_fd, custody=(rec.json_sha256, rec.npz_sha256))
    except WireError as e:
        wire_errors.append(str(e))
        return None, f"its result file was refused: {e}", changes
    if st is None:  # the step never finished
        return None, "", changes
    st.verified = changes if rec.changes is not None and not rec.error else None
    st.verify_error = rec.error
    if verify_on:
        bad = forging_changes(changes)
        if bad:
            return st, ("task code patched kws's harness before its result was written (seen by the fork server "
                        f"from outside the job: {', '.join(bad[:6])})"), changes
        if rec.changes is None or rec.error:
            return st, f"the job could not be checked from outside after the step: {rec.error or 'no check ran'}", \
                changes
    return st, "", changes


def _read_steps(out_fd: int, out: Path, n: int, records: dict[int, list[control.Verified]], budget: Budget,
                verify_on: bool) -> tuple[list[StepResult | None], list[str], dict[int, str], dict[int, list[str]]]:
    """(steps, wire errors, forged, forged changes) of a job of ``n`` steps (module doc)."""
    steps: list[StepResult | None] = []
    wire_errors: list[str] = []
    forged: dict[int, str] = {}
    forged_changes: dict[int, list[str]] = {}
    broken = next((r.custody for k, rs in records.items() if k >= n for r in rs if r.custody), "")
    for i in range(n):
        recs = records.get(i)
        rec = recs[0] if recs else None  # the server counts hand-overs: one per step
        st: StepResult | None = None
        changes: list[str] = []
        if broken:
            why = f"its result is refused: {broken}"
        elif rec is None:
            why = _NOT_HANDED_OVER if exists(out_fd, f"step-{i}.json") else ""
        elif rec.custody:
            why = f"its result is refused: {rec.custody}"
        else:
            st, why, changes = _read_handed_over(i, rec, out, out_fd, budget, verify_on, wire_errors)
        if why:
            st = None
            forged[i] = why + (f"; all changes seen: {', '.join(changes[:12])}" if changes else "")
            forged_changes[i] = changes
        steps.append(st)
    return steps, wire_errors, forged, forged_changes


def _outcome(end: JobEnd, steps: list[StepResult | None]) -> tuple[str, int | None, str | None, str]:
    """(status, exit code, signal name, limit) of :class:`JobResult` for a job that ended so."""
    if end.fired == "cancelled":
        return "cancelled", None, "SIGKILL", "cancelled"
    if end.fired:
        return "timeout", None, "SIGKILL", end.fired
    if end.ended:
        return "signal", None, "SIGKILL", "channel"
    if end.status is None:
        return "exit", None, None, ""
    if end.status < 0:
        num = -end.status
        sig = signal.Signals(num).name if num in signal.valid_signals() else str(num)
        limit = "memory" if sig == "SIGKILL" and end.oom else "fsize" if sig == "SIGXFSZ" else ""
        return "signal", None, sig, limit
    if end.status > 0 or any(s is None for s in steps):
        return "exit", end.status, None, ""
    return "ok", 0, None, ""


def collect(out_fd: int, out: Path, n: int, records: dict[int, list[control.Verified]], end: JobEnd, *,
            result_bytes: int, verify_on: bool, memory_note: str) -> JobResult:
    """The :class:`JobResult` of a finished job of ``n`` steps whose output folder is
    ``out`` (open as ``out_fd``), with the fork server's hand-over ``records`` (step ->
    its ``Verified`` messages), read within ``result_bytes`` bytes of results; with
    ``verify_on`` a step the out-of-process check did not clear is refused."""
    steps, wire_errors, forged, forged_changes = _read_steps(out_fd, out, n, records, Budget(result_bytes), verify_on)
    died_in = next((i for i in range(n) if steps[i] is None and i not in forged and exists(out_fd, f"step-{i}.start")),
                   None)
    so, so_n = read_tail(out_fd, "stdout.txt", TAIL_BYTES)
    se, se_n = read_tail(out_fd, "stderr.txt", TAIL_BYTES)
    status, code, sig, limit = _outcome(end, steps)
    return JobResult(
        status=status, exit_code=code, signal_name=sig, steps=steps, died_in_step=died_in,
        seconds=end.seconds, stdout_tail=so, stderr_tail=se, stdout_bytes=so_n,
        stderr_bytes=se_n, timeout_s=end.timeout, step_timeout_s=end.step_timeout, limit=limit,
        memory_note=memory_note, wire_errors=wire_errors, forged=forged, forged_changes=forged_changes,
        cancel_reason=end.cancel_reason, ended=end.ended,
    )
