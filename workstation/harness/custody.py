"""One job as the fork server holds it, and custody of its results (the *CPU time*,
*Blocked time* and *Custody* sections of :mod:`workstation.harness.forkserver`).

The job writes on its channel to the server: ``I 1`` / ``I 0`` around the import of a task
file, ``W 1`` / ``W 0`` around kws's own simulated load (only where the ``test_stretch``
setting is on), and ``V <sha256 of step-<i>.json> <sha256 of step-<i>.npz or ->`` after
each step, then waits for the server's ``k``. The server counts the hand-overs itself,
stops every process of the job (:func:`workstation.harness.procs.freeze`), reads the job's
watched namespaces from outside (:mod:`workstation.harness.watch`), hashes the step's two
files as they are on disk, checks them against the claim, lets the job go on and tells the
runner (:class:`~workstation.protocol.control.Verified`).

A hostile channel cannot stall the server: it reads a job's channel only when ``select``
says so, handles at most :data:`LINES_PER_TURN` of its lines per turn of its loop, and
writes its answers without blocking. A job that breaks the channel's protocol is *ended*
(:attr:`ServerJob.end`: the server kills it at once) and its custody broken (one
``Verified`` of step ``steps`` with ``custody`` set: the runner refuses every step): a line
kws's harness never writes, a flood, more hand-overs than steps, a hand-over out of order
(before the step's files exist, after the next step began, or not matching them), answers
it does not take (its end of the answer pipe full or closed), or its channel closed while
its process lives on (:data:`CLOSED_GRACE_S`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import time
from typing import Any

from workstation.harness import procs
from workstation.harness.watch import VerifyError, WatchTable
from workstation.protocol import childenv, control

#: most bytes the server buffers of a job's channel (more: a flood).
CHANNEL_LIMIT = 65536
#: most lines of one job's channel the server handles per turn of its loop (the rest wait
#: in the job's buffer), so a job that writes fast cannot keep it from the others.
LINES_PER_TURN = 64
#: seconds a job's process may live on after its channel closed before the server ends it
#: (a job's channel closes when its process exits; the server reaps it within this).
CLOSED_GRACE_S = 1.0


def emit(msg: control.FromServer) -> None:
    """Write one message to the runner (the server's stdout)."""
    sys.stdout.buffer.write(control.encode(msg))
    sys.stdout.flush()


def stretch_marks_allowed() -> bool:
    """Whether ``W`` marks are kws's own: only when the server runs with the
    ``test_stretch`` setting on (:data:`workstation.protocol.childenv.STRETCH`, in the
    server's own environment, which task code cannot change); otherwise a ``W`` is task code
    on the channel."""
    try:
        return float(os.environ.get(childenv.STRETCH, "1") or "1") > 1.0
    except ValueError:
        return False


class ServerJob:
    """One running job: its process ``pid`` (the server's child), ``init`` (pid 1 of its pid
    namespace, 0 without one), its channel (``ctl``: the server reads; ``ack``: the server
    writes, non-blocking), its step count and output folder as the server sees it, and what
    the channel said so far (hand-overs counted, custody broken, import phases, the job's
    end), and its blocked time (:meth:`usage`)."""

    def __init__(self, jid: int, pid: int, ctl: int, ack: int, steps: int, init: int = 0, out_dir: str = ""):
        self.id = jid
        self.pid = pid          # the job process (the server's child in both modes)
        self.init = init        # pid 1 of its pid namespace (MODE=bwrap), else 0
        self.target = pid       # the process whose memory is verified
        self.ctl = ctl
        self.ack = ack
        self.buf = b""
        self.killed = False
        self.steps = max(1, steps)
        #: the next step a hand-over (``V``) is counted as.
        self.next_step = 0
        #: why the job's custody is broken ("" while it holds): reported once.
        self.broken = ""
        #: why the server ends the job ("" while it may run): it broke the channel's protocol.
        self.end = ""
        #: when its channel closed (``time.monotonic()``), None while open.
        self.closed_at: float | None = None
        #: the job's output folder as the server sees it.
        self.out_dir = out_dir
        #: CPU and wall seconds of finished import phases, and the start of a running one.
        self.import_cpu = 0.0
        self.import_wall = 0.0
        self.import_since: tuple[float, float] | None = None
        #: seconds the job waited on kws (hand-overs being checked, kws's simulated load),
        #: and the start of a running ``W`` wait.
        self.kws_s = 0.0
        self.wait_since: float | None = None
        #: blocked and runnable seconds so far (:meth:`usage`), and the previous reading.
        self.blocked = 0.0
        self.runnable = 0.0
        self._last: tuple[float, procs.JobReading, float] | None = None

    def cpu(self) -> float:
        """CPU seconds of every process of the job so far (:func:`procs.job_cpu_seconds`)."""
        return procs.job_cpu_seconds((self.pid, self.init))

    def mark_import(self, begin: bool) -> None:
        """An ``I 1`` / ``I 0`` mark from the job (module doc)."""
        now_cpu, now_wall = self.cpu(), time.monotonic()
        if begin and self.import_since is None:
            self.import_since = (now_cpu, now_wall)
        elif not begin and self.import_since is not None:
            cpu0, wall0 = self.import_since
            self.import_cpu += max(0.0, now_cpu - cpu0)
            self.import_wall += max(0.0, now_wall - wall0)
            self.import_since = None

    def mark_wait(self, begin: bool) -> None:
        """A ``W 1`` / ``W 0`` mark from the job: kws's simulated load begins / ends."""
        now = time.monotonic()
        if begin and self.wait_since is None:
            self.wait_since = now
        elif not begin and self.wait_since is not None:
            self.kws_s += max(0.0, now - self.wait_since)
            self.wait_since = None

    def kws_seconds(self, now: float) -> float:
        """Seconds the job has waited on kws so far (a running ``W`` wait up to ``now``)."""
        return self.kws_s + (max(0.0, now - self.wait_since) if self.wait_since is not None else 0.0)

    def _account(self, now: float, reading: procs.JobReading) -> None:
        """Add the blocked seconds since the previous reading: the wall time between the
        two, less the time the job waited on kws, less what its threads did meanwhile (CPU
        seconds, and seconds waiting on a run queue), clipped at 0 (module doc of
        :mod:`workstation.harness.forkserver`, *Blocked time*); and the runnable seconds:
        the part of that wall time its threads spent waiting on a run queue and not
        computing (a busy machine), clipped at 0."""
        kws = self.kws_seconds(now)
        if self._last is not None:
            t0, r0, k0 = self._last
            ready = 0
            for tid, ns in reading.ready_ns.items():
                before = r0.ready_ns.get(tid, 0)
                if ns >= before:  # a reused thread id reads lower: nothing counted for it
                    ready += ns - before
            cpu = max(0.0, reading.cpu_s - r0.cpu_s)
            wall = max(0.0, (now - t0) - (kws - k0))
            self.blocked += max(0.0, wall - cpu - ready / 1e9)
            self.runnable += max(0.0, min(wall, cpu + ready / 1e9) - cpu)
        self._last = (now, reading, kws)

    def usage(self) -> dict[str, Any]:
        """The answer to a ``cpu`` request: the fields of
        :class:`~workstation.protocol.control.CpuUsage` but ``id`` and ``seq`` (seconds; an
        import still running counts up to now)."""
        now = time.monotonic()
        reading = procs.read_job(self.pid, self.init)
        self._account(now, reading)
        cpu = reading.cpu_s
        imp_cpu, imp_wall = self.import_cpu, self.import_wall
        if self.import_since is not None:
            imp_cpu += max(0.0, cpu - self.import_since[0])
            imp_wall += max(0.0, now - self.import_since[1])
        return {"cpu_s": round(cpu, 3), "import_cpu_s": round(imp_cpu, 3), "import_wall_s": round(imp_wall, 3),
                "importing": self.import_since is not None, "blocked_s": round(self.blocked, 3),
                "runnable_s": round(self.runnable, 3)}

    def pending(self) -> bool:
        """Whether whole lines of the channel wait to be handled (and the job may run)."""
        return not self.end and b"\n" in self.buf


def file_sha256(path: str) -> str | None:
    """sha256 of the regular file ``path`` (never following a symlink); None when there is
    none.

    Raises:
        OSError: ``path`` is not a regular file, or it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{os.path.basename(path)} is not a regular file")
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
        return h.hexdigest()


def step_files(job: ServerJob, step: int, claimed: tuple[str, str]) -> tuple[str, str, str]:
    """(json sha256, npz sha256, problem) of step ``step``'s files as they are now (the job
    stopped), checked against the hand-over's ``claimed`` hashes (module doc)."""
    base = os.path.join(job.out_dir, f"step-{step}")
    try:
        js, nz = file_sha256(base + ".json"), file_sha256(base + ".npz")
    except OSError as e:
        return "", "", f"its result files could not be read: {e}"
    js, nz = js or "", nz or control.NO_ARRAYS
    if not js:
        return js, nz, (f"step-{step}.json was not there when step {step} was handed over to kws (a hand-over "
                        "sent before the step ended: task code on kws's channel)")
    if os.path.lexists(os.path.join(job.out_dir, f"step-{step + 1}.start")):
        return js, nz, (f"step {step + 1} had already begun when step {step} was handed over to kws (task code "
                        "on kws's channel)")
    if (js, nz) != claimed:
        which = f"step-{step}.json" if js != claimed[0] else f"step-{step}.npz"
        return js, nz, (f"{which} on disk does not match the step's hand-over (rewritten after kws's harness wrote "
                        "it, or the hand-over did not come from kws's harness)")
    return js, nz, ""


def verify(job: ServerJob, step: int, claimed: tuple[str, str], table: WatchTable | None) -> str:
    """Check the hand-over of step ``step`` with the job stopped and tell the runner
    (module doc). Returns why the hand-over is out of order or does not match the step's
    files ("" when it is in order; the job is then ended by the caller); a job kws could
    not stop or read is reported in the record, not returned."""
    changes: list[str] | None = None
    error = problem = order = ""
    js = nz = ""
    frozen, why = procs.freeze(job.pid, job.init, job.target)
    try:
        if why:
            error = problem = why
        else:
            js, nz, order = step_files(job, step, claimed)
            problem = order
            if table is None or not table.ok:
                error = table.reason if table is not None else "no watch table"
            else:
                try:
                    changes = table.verify(job.target)
                except (VerifyError, OSError) as e:
                    error = str(e)
    finally:
        procs.thaw(frozen)
    emit(control.Verified(id=job.id, step=step, changes=changes, error=error, custody=problem,
                          json_sha256=js, npz_sha256=nz))
    return order


def break_custody(job: ServerJob, why: str) -> None:
    """Report, once, that the job's custody is broken (every step refused)."""
    if not job.broken:
        job.broken = why
        emit(control.Verified(id=job.id, step=job.steps, custody=why))


def end_job(job: ServerJob, why: str) -> None:
    """The job broke the channel's protocol: its custody is broken (every step refused)
    and the server is to end it at once (:attr:`ServerJob.end`; the first reason stays)."""
    break_custody(job, why)
    if not job.end:
        job.end = why


def read_channel(job: ServerJob) -> None:
    """Read what the job wrote on its channel (the server's ``select`` said it is
    readable) into its buffer; a closed channel sets ``job.ctl`` to -1 and
    ``job.closed_at``, a flood ends the job."""
    try:
        chunk = os.read(job.ctl, 1 << 16)
    except BlockingIOError:
        return
    except OSError:
        chunk = b""
    if not chunk:
        os.close(job.ctl)
        job.ctl = -1
        job.closed_at = time.monotonic()
        return
    if job.end:
        return  # ended: what it still writes is not read
    job.buf += chunk
    if len(job.buf) > CHANNEL_LIMIT:  # a flood: stop reading it
        job.buf = b""
        end_job(job, "a flood of bytes came on the job's channel to kws's fork server (task code wrote on it)")


def handle_lines(job: ServerJob, table: WatchTable | None, most: int = LINES_PER_TURN) -> None:
    """Act on at most ``most`` whole lines of the job's buffer (module doc)."""
    for _ in range(most):
        if job.end or b"\n" not in job.buf:
            return
        line, job.buf = job.buf.split(b"\n", 1)
        _handle_line(job, line, table)


def handle_channel(job: ServerJob, table: WatchTable | None) -> None:
    """Read the job's channel once and act on the whole lines it holds (a job that ended:
    what it wrote before it ended)."""
    read_channel(job)
    handle_lines(job, table, most=1 << 30)


def _handle_line(job: ServerJob, line: bytes, table: WatchTable | None) -> None:
    msg = control.parse_job_line(line)
    if msg is None or (msg[0] == "W" and not stretch_marks_allowed()):
        end_job(job, "a line kws's harness never writes came on the job's channel to kws's fork server "
                     f"({line[:60]!r}: task code wrote on it)")
        return
    op, arg = msg
    if op == "I":
        job.mark_import(arg)
        return
    if op == "W":
        job.mark_wait(arg)
        return
    t0 = time.monotonic()
    step, job.next_step = job.next_step, job.next_step + 1
    if step >= job.steps:
        end_job(job, f"more steps were handed over to kws than the job's {job.steps} (task code sent "
                     "hand-overs on kws's channel)")
        return
    order = verify(job, step, arg, table)
    if order:
        end_job(job, order)
        return
    try:
        os.write(job.ack, b"k")
    except BlockingIOError:
        end_job(job, "the job did not take kws's answers on its channel (task code sent hand-overs and read "
                     "none of the answers)")
    except OSError:
        end_job(job, "the job closed its end of kws's channel (task code on kws's channel)")
    job.kws_s += time.monotonic() - t0
