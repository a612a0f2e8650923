"""One job as the fork server holds it, and custody of its results (the *CPU time* and
*Custody* sections of :mod:`workstation.harness.forkserver`).

The job writes on its channel to the server: ``I 1`` / ``I 0`` around the import of a task
file, and ``V <sha256 of step-<i>.json> <sha256 of step-<i>.npz or ->`` after each step,
then waits for the server's ``k``. The server counts the hand-overs itself, stops every
process of the job (:func:`workstation.harness.procs.freeze`), reads the job's watched
namespaces from outside (:mod:`workstation.harness.watch`), hashes the step's two files as
they are on disk, checks them against the claim, lets the job go on and tells the runner
(:class:`~workstation.protocol.control.Verified`). A line kws's harness never writes, a
flood, or more hand-overs than steps breaks the job's custody (one ``Verified`` of step
``steps`` with ``custody`` set: the runner refuses every step).
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
from workstation.protocol import control

#: most bytes the server buffers of a job's channel without a newline (more: a flood).
CHANNEL_LIMIT = 65536


def emit(msg: control.FromServer) -> None:
    """Write one message to the runner (the server's stdout)."""
    sys.stdout.buffer.write(control.encode(msg))
    sys.stdout.flush()


class ServerJob:
    """One running job: its process ``pid`` (the server's child), ``init`` (pid 1 of its pid
    namespace, 0 without one), its channel (``ctl``: the server reads; ``ack``: the server
    writes), its step count and output folder as the server sees it, and what the channel
    said so far (hand-overs counted, custody broken, import phases)."""

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
        #: the job's output folder as the server sees it.
        self.out_dir = out_dir
        #: CPU and wall seconds of finished import phases, and the start of a running one.
        self.import_cpu = 0.0
        self.import_wall = 0.0
        self.import_since: tuple[float, float] | None = None

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

    def usage(self) -> dict[str, Any]:
        """The answer to a ``cpu`` request: the fields of
        :class:`~workstation.protocol.control.CpuUsage` but ``id`` and ``seq`` (seconds; an
        import still running counts up to now)."""
        cpu = self.cpu()
        imp_cpu, imp_wall = self.import_cpu, self.import_wall
        if self.import_since is not None:
            imp_cpu += max(0.0, cpu - self.import_since[0])
            imp_wall += max(0.0, time.monotonic() - self.import_since[1])
        return {"cpu_s": round(cpu, 3), "import_cpu_s": round(imp_cpu, 3), "import_wall_s": round(imp_wall, 3),
                "importing": self.import_since is not None}


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


def verify(job: ServerJob, step: int, claimed: tuple[str, str], table: WatchTable | None) -> None:
    """Check the hand-over of step ``step`` with the job stopped and tell the runner
    (module doc)."""
    changes: list[str] | None = None
    error = problem = ""
    js = nz = ""
    frozen, why = procs.freeze(job.pid, job.init, job.target)
    try:
        if why:
            error = problem = why
        else:
            js, nz, problem = step_files(job, step, claimed)
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


def break_custody(job: ServerJob, why: str) -> None:
    """Report, once, that the job's custody is broken (every step refused)."""
    if not job.broken:
        job.broken = why
        emit(control.Verified(id=job.id, step=job.steps, custody=why))


def handle_channel(job: ServerJob, table: WatchTable | None) -> None:
    """Read what the job wrote on its channel and act on each whole line (module doc); a
    closed channel sets ``job.ctl`` to -1."""
    try:
        chunk = os.read(job.ctl, 4096)
    except OSError:
        chunk = b""
    if not chunk:
        os.close(job.ctl)
        job.ctl = -1
        return
    job.buf += chunk
    if len(job.buf) > CHANNEL_LIMIT:  # a flood: stop reading it
        job.buf = b""
        break_custody(job, "a flood of bytes came on the job's channel to kws's fork server (task code wrote on it)")
        return
    while b"\n" in job.buf:
        line, job.buf = job.buf.split(b"\n", 1)
        _handle_line(job, line, table)


def _handle_line(job: ServerJob, line: bytes, table: WatchTable | None) -> None:
    msg = control.parse_job_line(line)
    if msg is None:
        break_custody(job, "a line kws's harness never writes came on the job's channel to kws's fork server "
                           f"({line[:60]!r}: task code wrote on it)")
        return
    op, arg = msg
    if op == "I":
        job.mark_import(arg)
        return
    step, job.next_step = job.next_step, job.next_step + 1
    if job.broken:
        pass
    elif step >= job.steps:
        break_custody(job, f"more steps were handed over to kws than the job's {job.steps} (task code sent "
                           "hand-overs on kws's channel)")
    else:
        verify(job, step, arg, table)
    try:
        os.write(job.ack, b"k")
    except OSError:
        pass
