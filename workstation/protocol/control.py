"""Typed control messages between the runner (:mod:`workstation.runner.sandbox`) and the
fork server (:mod:`workstation.harness.forkserver`), between the review app and its check
server (:mod:`workstation.engine.server`: :data:`ToCheckServer`, :data:`FromCheckServer`),
and the job's channel to the fork server.

Runner and server exchange one JSON object per line, each a :mod:`msgspec` Struct tagged
by ``op``: the runner sends :data:`ToServer` (:class:`RunJob`, :class:`KillJob`,
:class:`CpuAsk`, :class:`ReleaseJob`), the server answers :data:`FromServer` (:class:`Ready` once, then per job
:class:`Started`, one :class:`Verified` per step the job handed over, :class:`CpuUsage`
per :class:`CpuAsk`, :class:`Exited`). A line that does not decode to its direction's
union is dropped by the reader (:func:`decode_from_server`), never half-read.

The job's channel to the server (a pipe the harness writes, task code can write too) is
text, parsed strictly by :func:`parse_job_line`: ``I 1`` / ``I 0`` (a task file's import
begins / ends), ``W 1`` / ``W 0`` (kws's simulated load begins / ends: the ``test_stretch``
setting only; the server refuses it otherwise) and ``V <sha256 of step-<i>.json> <sha256
of step-<i>.npz, or ->`` (the step that just ended). Anything else on it is task code
writing on kws's channel: the server ends the job (:mod:`workstation.harness.custody`).

Custody: the server counts the ``V`` messages of a job itself (the first is step 0, the
next step 1, ...); the job never names the step. For each it stops every process of the
job, checks the job's memory from outside, hashes ``step-<i>.json`` / ``step-<i>.npz`` as
they are on disk at that moment, and reports them in :class:`Verified`
(``json_sha256``, ``npz_sha256``; ``"-"``: no arrays file) with an ``error`` when they are
not what the harness said it wrote. The runner then reads each result file once, into
memory, and uses it only when its bytes hash to the recorded value
(:func:`workstation.protocol.wire.read_step` with ``custody``): a file rewritten after the
check, a check of a step whose files were not there yet, more ``V`` messages than steps or
a foreign line on the channel make the result refused (``forged``), never judged.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

#: sha256 of no arrays file (``step-<i>.npz`` absent).
NO_ARRAYS = "-"


class RunJob(msgspec.Struct, tag="run", tag_field="op", frozen=True):
    """Start a job. ``job``: the job file's path as the server sees it; ``jobdir`` /
    ``cache``: the job's folder and compiler cache (server's view); ``cwd``, ``home``,
    ``cache_root``: paths as the job sees them; ``steps``: how many steps the job has;
    ``limits``: resource limits (``fsize``, ``as``: bytes or None); ``disk_bytes``: the
    cap of the job's folder (the server puts it on a tmpfs of that size; 0: left on disk),
    ``tmp_bytes`` / ``shm_bytes``: the caps of its private ``/tmp`` and of ``/dev/shm`` and
    ``/var/tmp`` (0: :mod:`workstation.harness.jobns`'s defaults)."""

    id: int
    job: str
    jobdir: str
    cwd: str
    steps: int
    cache: str | None = None
    home: str = ""
    cache_root: str = ""
    limits: dict[str, int | None] = {}
    disk_bytes: int = 0
    tmp_bytes: int = 0
    shm_bytes: int = 0


class ReleaseJob(msgspec.Struct, tag="release", tag_field="op", frozen=True):
    """The runner has read an ended job's folder: the server detaches its tmpfs."""

    id: int


class KillJob(msgspec.Struct, tag="kill", tag_field="op", frozen=True):
    """Kill a running job (and everything in its namespaces)."""

    id: int


class CpuAsk(msgspec.Struct, tag="cpu", tag_field="op", frozen=True):
    """Ask for a running job's CPU seconds (answered by :class:`CpuUsage` with ``seq``)."""

    id: int
    seq: int


class Ready(msgspec.Struct, tag="ready", tag_field="op", frozen=True):
    """The server is up. ``jobns``: why a job cannot get namespaces of its own ("" when it
    can); ``verifier``: why the out-of-process check is off ("" when on); ``watched``:
    entries the check compares; ``limits``: resource limits in force (name -> [soft, hard])."""

    device: str
    label: str
    interpreter: bool
    versions: dict[str, str]
    mode: str
    jobns: str = ""
    verifier: str = ""
    watched: int = 0
    limits: dict[str, list[int]] = {}
    name: str = ""


class Started(msgspec.Struct, tag="started", tag_field="op", frozen=True):
    id: int


class Verified(msgspec.Struct, tag="verified", tag_field="op", frozen=True):
    """The server's record of step ``step`` (counted by the server: module doc).
    ``changes``: what the out-of-process check saw changed (None: no check ran);
    ``error``: why the memory check did not run ("" when it did); ``custody``: why the
    step's files cannot be trusted ("" when they can; on a step past the last: every step
    of the job is refused); ``json_sha256`` /
    ``npz_sha256``: the files' hashes at the check (``""``: the file was not there,
    :data:`NO_ARRAYS`: no arrays file)."""

    id: int
    step: int
    changes: list[str] | None = None
    error: str = ""
    custody: str = ""
    json_sha256: str = ""
    npz_sha256: str = ""


class CpuUsage(msgspec.Struct, tag="cpu", tag_field="op", frozen=True):
    """A running job's CPU seconds (:func:`workstation.harness.procs.read_job`) and its
    *blocked* seconds (``blocked_s``): wall time in which no thread of the job ran or
    waited to run, less the time it waited on kws (hand-overs, the simulated load), summed
    over the intervals between readings (:class:`workstation.harness.custody.ServerJob`),
    and its *runnable* seconds (``runnable_s``): wall time its threads spent waiting on a
    run queue instead of computing (a busy machine), summed the same way.
    ``import_cpu_s`` / ``import_wall_s``: of its task-file imports (``importing``: one runs
    now)."""

    id: int
    seq: int
    cpu_s: float
    import_cpu_s: float
    import_wall_s: float
    importing: bool
    blocked_s: float = 0.0
    runnable_s: float = 0.0


class Exited(msgspec.Struct, tag="exited", tag_field="op", frozen=True):
    """A job ended: ``status`` its exit code or minus the signal; ``killed`` when the server
    killed it (on request, or because it broke its channel's protocol: ``ended`` says why,
    "" otherwise)."""

    id: int
    status: int
    killed: bool = False
    ended: str = ""


class CheckRun(msgspec.Struct, tag="run", tag_field="op", frozen=True):
    """To the review app's check server (:mod:`workstation.engine.server`): run the checks
    (``only``: these ids; None: all) on ``task_dir``; its events come back as
    :class:`CheckEvent` with the same ``run``."""

    run: int
    task_dir: str
    only: list[str] | None = None


class WarmUp(msgspec.Struct, tag="warm", tag_field="op", frozen=True):
    """To the check server: start the fork server now (answered by :class:`Warm`)."""


class Warm(msgspec.Struct, tag="warm", tag_field="op", frozen=True):
    """From the check server: its fork server is up on ``device`` (a label), or ``error``."""

    device: str = ""
    error: str = ""


class CheckEvent(msgspec.Struct, tag="event", tag_field="op", frozen=True):
    """From the check server: one engine event of run ``run``
    (:func:`workstation.engine.events.normalise_event`), ending with ``done`` or ``error``."""

    run: int
    kind: str
    data: dict[str, Any]


ToServer = RunJob | KillJob | CpuAsk | ReleaseJob
ToCheckServer = CheckRun | WarmUp
FromCheckServer = Warm | CheckEvent
FromServer = Ready | Started | Verified | CpuUsage | Exited

_encoder = msgspec.json.Encoder(enc_hook=str)  # a value JSON has no form for travels as its text
_to_server = msgspec.json.Decoder(ToServer)
_from_server = msgspec.json.Decoder(FromServer)
_to_check_server = msgspec.json.Decoder(ToCheckServer)
_from_check_server = msgspec.json.Decoder(FromCheckServer)


def encode(msg: Any) -> bytes:
    """One line (with its newline) for a message of either direction."""
    return _encoder.encode(msg) + b"\n"


def decode_to_server(line: bytes | str) -> Any:
    """A :data:`ToServer` message; raises :class:`msgspec.DecodeError` (or its
    ``ValidationError``) for anything else."""
    return _to_server.decode(line)


def _decode_or_none(decoder: msgspec.json.Decoder[Any], line: bytes | str) -> Any:
    try:
        return decoder.decode(line)
    except msgspec.DecodeError:
        return None


def decode_from_server(line: bytes | str) -> Any:
    """A :data:`FromServer` message, or None for a line that is not one (dropped)."""
    return _decode_or_none(_from_server, line)


def decode_to_check_server(line: bytes | str) -> Any:
    """A :data:`ToCheckServer` message, or None for a line that is not one (dropped)."""
    return _decode_or_none(_to_check_server, line)


def decode_from_check_server(line: bytes | str) -> Any:
    """A :data:`FromCheckServer` message, or None for a line that is not one (dropped)."""
    return _decode_or_none(_from_check_server, line)


_SHA = r"[0-9a-f]{64}"
_JOB_LINE = re.compile(rb"^(?:([IW]) ([01])|V (" + _SHA.encode() + rb") (" + _SHA.encode() + rb"|-))$")


def parse_job_line(line: bytes) -> tuple[str, Any] | None:
    """``("I", True|False)``, ``("W", True|False)``, ``("V", (json_sha256, npz_sha256))``
    or None for a line kws's harness never writes (task code on the channel)."""
    m = _JOB_LINE.fullmatch(line)
    if m is None:
        return None
    if m.group(1) is not None:
        return m.group(1).decode(), m.group(2) == b"1"
    return "V", (m.group(3).decode(), m.group(4).decode())
