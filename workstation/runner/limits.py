"""What stops a job: its resource limits and its CPU-second budgets.

- Resource limits the fork server applies in each job (:data:`STDIO_LIMIT_BYTES` as
  ``RLIMIT_FSIZE``, :data:`CPU_ADDRESS_SPACE_BYTES` as ``RLIMIT_AS`` on the CPU), each the
  smaller of kws's value and the inherited one (:func:`inherited_limit_notes` says where
  the inherited one is lower).
- Step budgets in CPU seconds (user + system) of every process of the job, as the fork
  server reads them from ``/proc`` (``workstation.harness.procs.read_job``), the imports of
  task files charged to the job's import budget instead; *wait budgets* in blocked
  seconds (wall time in which no thread of the job ran or waited to run: a sleep, a
  blocked read, a deadlock; ``workstation.harness.custody.ServerJob``), which a loaded
  machine does not inflate either; a wall-clock backstop (:func:`wall_backstop`) only
  against kws's own faults (a fork server that stopped answering): it counts wall time
  less the job's *runnable* seconds (waiting on a run queue: a busy machine), so load
  alone does not reach it. :class:`BudgetWatch` decides, reading by reading, which of them
  fired.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from workstation.protocol import control

#: the file-size limit of a job (bytes): a stdout/stderr flood ends with ``SIGXFSZ``.
STDIO_LIMIT_BYTES = 256 * 1024 * 1024
#: the address-space limit of a job on the CPU (bytes; none on a GPU: CUDA reserves more).
CPU_ADDRESS_SPACE_BYTES = 24 * 1024 ** 3
#: the wall-clock backstop of a CPU budget of b seconds is WALL_FACTOR * b + WALL_SLACK_S
#: (:func:`wall_backstop`): a loaded machine may slow a job tenfold before it stops it.
WALL_FACTOR = 10.0
WALL_SLACK_S = 30.0
#: how often the runner asks the fork server for a running job's CPU seconds.
CPU_POLL_S = 0.2


def wall_backstop(cpu_budget_s: float) -> float:
    """The wall-clock seconds after which a step (or a job's imports) with a CPU budget of
    ``cpu_budget_s`` is stopped although neither its CPU nor its wait budget ran out:
    counted in wall seconds less the job's runnable seconds (:class:`BudgetWatch`), it is
    reached only when kws lost track of the job (readings that stopped coming). What this
    backstop alone stops is never called a hang (limit ``"wall"``)."""
    return WALL_FACTOR * cpu_budget_s + WALL_SLACK_S


def _inherited(which: int) -> tuple[int | None, int]:
    """(the lower of the soft and hard limit, None when both are unlimited; the hard limit)."""
    soft, hard = resource.getrlimit(which)
    finite = [x for x in (soft, hard) if x != resource.RLIM_INFINITY]
    return (min(finite) if finite else None), hard


def inherited_limit_notes() -> list[str]:
    """Inherited resource limits lower than kws's own, in words (empty when none)."""
    notes = []
    lim, _ = _inherited(resource.RLIMIT_AS)
    if lim is not None and lim < CPU_ADDRESS_SPACE_BYTES:
        notes.append(f"an inherited address-space limit (ulimit -v) of {lim // 2**20} MiB is lower than kws's "
                     f"{CPU_ADDRESS_SPACE_BYTES // 2**30} GiB per job: jobs run within it, and a MemoryError may "
                     "come from it rather than from the task")
    _, hard = _inherited(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY and hard < STDIO_LIMIT_BYTES:
        notes.append(f"an inherited file-size limit (ulimit -f) of {hard // 2**20} MiB is lower than kws's "
                     f"{STDIO_LIMIT_BYTES // 2**20} MiB")
    return notes


@dataclass
class JobUse:
    """A job's last CPU reading (seconds; None before the first): ``cpu_s`` of the whole
    job, ``step_cpu_s`` of the running step with imports excluded, ``import_cpu_s`` of its
    imports, ``step_blocked_s`` the running step's blocked seconds; ``budget`` / ``wait``:
    the running step's CPU budget and wait budget (None: none, or no step began)."""

    cpu_s: float | None = None
    step_cpu_s: float | None = None
    import_cpu_s: float | None = None
    step_blocked_s: float | None = None
    budget: float | None = None
    wait: float | None = None


class BudgetWatch:
    """Which limit of one running job fired, reading by reading.

    The runner tells it when a step begins (:meth:`step_began`: its ``.start`` file
    appeared), asks the fork server for a CPU reading when :meth:`next_ask` gives a number,
    and hands every reading to :meth:`fired`. A step's CPU counts from the first reading the
    server took after the step began (a reading's ``seq`` at least the one asked after it).

    Args:
        budgets: per step, its CPU budget in CPU seconds (None: no budget).
        import_budget: CPU seconds the job's imports may use together.
        timeout: the job's wall-clock limit, seconds since ``t0``.
        t0: ``time.monotonic()`` when the job was submitted.
        waits: per step, its wait budget in blocked seconds (None: none; the list None:
            none for any step).
    """

    def __init__(self, budgets: list[float | None], import_budget: float, timeout: float, t0: float,
                 waits: list[float | None] | None = None) -> None:
        self.budgets = budgets
        self.waits = list(waits) if waits is not None else [None] * len(budgets)
        self.import_budget = import_budget
        self.timeout = timeout
        self.t0 = t0
        #: the last reading (module doc of :class:`JobUse`).
        self.use = JobUse()
        #: the running step (-1 before the first began).
        self.current = -1
        self._since = t0
        # (CPU without imports, import wall, blocked, runnable) at the step's start
        self._base: tuple[float, float, float, float] | None = None
        self._runnable = 0.0  # the job's runnable seconds at the latest reading
        self._seq = 0
        self._want = 0
        self._last_ask = 0.0

    def past_job_limit(self, now: float) -> bool:
        """Whether the job's wall-clock limit has passed at ``now``: wall seconds since
        ``t0`` less the job's runnable seconds at the latest reading (a busy machine slows
        the job without bringing it nearer its limit)."""
        return now - self.t0 - self._runnable > self.timeout

    def step_began(self, now: float) -> None:
        """The next step's ``.start`` file appeared at ``now``."""
        self.current += 1
        self._since, self._base, self._last_ask = now, None, 0.0
        self.use.budget = self.budgets[self.current]
        self.use.wait = self.waits[self.current]
        self.use.step_blocked_s = None
        self._want = self._seq + 1

    def next_ask(self, now: float) -> int | None:
        """The ``seq`` of the CPU reading to ask the server for now (every
        :data:`CPU_POLL_S`, and at once after a step began), or None."""
        if now - self._last_ask < CPU_POLL_S:
            return None
        self._seq, self._last_ask = self._seq + 1, now
        return self._seq

    def fired(self, now: float, reading: control.CpuUsage | None) -> str:
        """The limit the latest ``reading`` shows fired, or ``""``: ``"import"`` (the
        imports used more than the import budget in CPU seconds, or a running import's wall
        time passed its backstop), ``"step"`` (the running step used more CPU seconds than
        its budget, imports excluded), ``"blocked"`` (the running step was blocked longer
        than its wait budget: its imports' blocked time counts), ``"wall"`` (the running
        step's wall time, imports and runnable seconds excluded, passed
        :func:`wall_backstop` of the larger of its two budgets)."""
        if reading is None:
            return ""
        cpu, imp_cpu, imp_wall = reading.cpu_s, reading.import_cpu_s, reading.import_wall_s
        self.use.cpu_s, self.use.import_cpu_s = cpu, imp_cpu
        self._runnable = reading.runnable_s
        if imp_cpu > self.import_budget or (reading.importing and imp_wall > wall_backstop(self.import_budget)):
            return "import"
        if self.current < 0:
            return ""
        if self._base is None:
            if reading.seq < self._want:
                return ""  # a reading from before this step began
            self._base = (cpu - imp_cpu, imp_wall, reading.blocked_s, reading.runnable_s)
        step_cpu = self.use.step_cpu_s = cpu - imp_cpu - self._base[0]
        blocked = self.use.step_blocked_s = reading.blocked_s - self._base[2]
        budget, wait = self.budgets[self.current], self.waits[self.current]
        if budget is not None and step_cpu > budget:
            return "step"
        if wait is not None and blocked > wait:
            return "blocked"
        guard = max(budget or 0.0, wait or 0.0)
        busy = reading.runnable_s - self._base[3]
        if guard and now - self._since - (imp_wall - self._base[1]) - busy > wall_backstop(guard):
            return "wall"
        return ""
