"""One ``kws check`` run on a worker (a local pool slot or a Ray task), and its payload.

The parent packs the task version into a tar payload (:func:`task_payload`: ``git archive``
of ``tasks/<id>`` in ``HEAD``, with ``queue.toml`` and the shared helper folder; the work
tree's files for a task with uncommitted changes), so a worker needs no copy of the queue:
:func:`run_spec` unpacks it into a temporary queue folder and runs

    python -m workstation.screen.supervise --timeout S --module workstation.cli.main -- \\
        check <tmp>/queue/tasks/<id> --json [--only IDS] [ARGS...]

(``kws check`` in a forked child of the supervisor) with the worker's own Python, so kws's isolation, sandbox and limits apply on that node as
in any ``kws check``. The report's paths under the temporary folder are rewritten relative
to the queue root (``tasks/<id>``), so a stored report names nothing of the worker.
Exit statuses of ``kws check`` (cli/check.py): 0 and 1 come with a report, 2 with a load
error, 3 when its isolated runner failed; the supervisor adds 124 (time limit) and
``128 + signal``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from workstation.repo.gitqueue import run_git
from workstation.screen.keys import library_versions
from workstation.screen.supervise import EXIT_TIMEOUT

__all__ = ["RunOutcome", "RunSpec", "run_spec", "task_payload"]

#: the most of a run's stdout (its JSON report) read back, bytes.
REPORT_LIMIT = 64 * 1024 * 1024
#: seconds past a run's own time limit after which the worker kills its supervisor.
GRACE_S = 30.0


@dataclass(frozen=True)
class RunSpec:
    """One ``kws check`` run: ``part`` is ``"main"`` (every selected check without timing
    work) or ``"timing"`` (the timing checks, which need the node to themselves);
    ``only``: the check ids; ``args``: further ``kws check`` arguments (``--seeds``,
    ``--device``, sandbox flags); ``timeout``: seconds; ``modules``: the task's external
    imports, whose versions on the worker the outcome reports (``libs``)."""

    job: str
    task: str
    part: str
    payload: bytes = field(repr=False)
    only: tuple[str, ...]
    args: tuple[str, ...]
    timeout: float
    exclusive: bool = False
    modules: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    """What one run gave. ``status``: ``ok`` (a report: exit 0, 1 or 4), ``load-error`` (exit
    2, ``error`` holds the contract's error object), ``runner-error`` (exit 3), ``timeout``
    (the supervisor's limit, or a force-cancel), ``killed`` (stopped by a signal: kws screen
    stopping), ``crash`` (anything else, no report), ``lost`` (the cluster lost the run:
    the node died, the worker crashed). ``started`` / ``finished``: ISO 8601 UTC; ``host``:
    where it ran; ``t_start`` / ``t_end`` the same as Unix times; ``attempts``: 2 when it
    was retried; ``libs``: the versions of the task's libraries on the worker
    (:func:`~workstation.screen.keys.library_versions`). ``seconds``: the run's wall time on
    the worker; ``check_seconds``: the ``kws check`` process's own; ``interpreter_seconds``:
    the start of the supervisor's interpreter, which ``kws check`` runs in (a plain ``kws
    check`` pays it too); the rest is the screen's overhead on the worker (unpacking, the
    supervisor's imports and clean-up, the library versions)."""

    job: str
    task: str
    part: str
    status: str
    exit_code: int | None = None
    report: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    stderr_tail: str = ""
    seconds: float = 0.0
    started: str = ""
    finished: str = ""
    host: str = ""
    node: str = ""
    attempts: int = 1
    check_seconds: float = 0.0
    interpreter_seconds: float = 0.0
    t_start: float = 0.0
    t_end: float = 0.0
    libs: dict[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """One line on why there is no report (empty when there is one)."""
        if self.status == "ok":
            return ""
        if self.error:
            return str(self.error.get("problem") or self.error)[:500]
        tail = [ln for ln in self.stderr_tail.splitlines() if ln.strip()]
        return f"{self.status}: " + (tail[-1][:400] if tail else f"exit status {self.exit_code}")


def _iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).replace(microsecond=0).isoformat()


def task_payload(repo: git.Repo, task_id: str, *, dirty: bool, extra: Iterable[str] = ()) -> bytes:
    """A tar of ``tasks/<task_id>`` and the ``extra`` paths (``queue.toml``, the shared
    helper folder; missing ones left out): from ``HEAD`` (``git archive``) for a clean task,
    from the work tree (without ``__pycache__``) for one with uncommitted changes.

    Raises:
        git.GitCommandError: ``git archive`` failed.
    """
    rel = [f"tasks/{task_id}"]
    root = Path(repo.working_tree_dir or ".")
    if not dirty:
        head = repo.head.commit.tree
        for p in extra:
            try:
                head / p
            except KeyError:
                continue
            rel.append(p)
        return run_git(repo, "archive", "--format=tar", "HEAD", "--", *rel)
    buf = io.BytesIO()

    def keep(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = Path(ti.name).name
        if name == "__pycache__" or name.endswith(".pyc") or ti.issym() or ti.islnk():
            return None
        return ti

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in [*rel, *extra]:
            if (root / p).exists():
                tar.add(root / p, arcname=p, filter=keep)
    return buf.getvalue()


def _read_capped(path: Path, limit: int) -> str:
    with path.open("rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")


def run_spec(spec: RunSpec, *, node: str = "", host: str | None = None,
             on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> RunOutcome:
    """Run ``spec`` here (see the module docstring) and return what it gave, with its
    start, end and wall time. Never raises for a failing run: every failure is a
    :class:`RunOutcome` status."""
    t0 = time.time()
    oc = _run(spec, node, host or socket.gethostname(), on_start)
    t1 = time.time()
    oc.started, oc.finished, oc.seconds = _iso(t0), _iso(t1), t1 - t0
    oc.t_start, oc.t_end = t0, t1
    oc.libs = library_versions(spec.modules)
    return oc


def _run(spec: RunSpec, node: str, where: str,
         on_start: Callable[[subprocess.Popen[bytes]], None] | None) -> RunOutcome:
    tmp = Path(tempfile.mkdtemp(prefix="kws-screen-"))
    try:
        qroot = tmp / "queue"
        qroot.mkdir()
        with tarfile.open(fileobj=io.BytesIO(spec.payload), mode="r") as tar:
            tar.extractall(qroot, filter="data")
        check = ["check", str(qroot / "tasks" / spec.task), "--json"]
        if spec.only:
            check += ["--only", ",".join(spec.only)]
        check += list(spec.args)
        sup = tmp / "supervise.json"
        cmd = [sys.executable, "-m", "workstation.screen.supervise", "--timeout", f"{spec.timeout:g}",
               "--parent", str(os.getpid()), "--report-file", str(sup), "--module", "workstation.cli.main",
               "--", *check]
        out_p, err_p = tmp / "stdout", tmp / "stderr"
        code, t_popen = _supervised(cmd, tmp, out_p, err_p, spec.timeout + GRACE_S, on_start)
        text = _read_capped(out_p, REPORT_LIMIT).replace(str(qroot) + os.sep, "")
        stderr = _read_capped(err_p, 1 << 20).replace(str(qroot) + os.sep, "")[-4000:]
        oc = RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="crash", exit_code=code,
                        stderr_tail=stderr, host=where, node=node)
        try:
            sup_doc = json.loads(sup.read_text(encoding="utf-8"))
            oc.check_seconds = float(sup_doc["child_seconds"])
            oc.interpreter_seconds = max(0.0, float(sup_doc["started_at"]) - t_popen)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no figures from the supervisor: the run's own outcome stands
        _judge(oc, code, text)
        return oc
    except (OSError, tarfile.TarError) as e:
        return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="crash",
                          stderr_tail=f"{type(e).__name__}: {e}", host=where, node=node)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _supervised(cmd: list[str], cwd: Path, out_p: Path, err_p: Path, limit: float,
                on_start: Callable[[subprocess.Popen[bytes]], None] | None) -> tuple[int, float]:
    """Run the supervisor command ``cmd`` in ``cwd`` (its output into ``out_p`` and
    ``err_p``); returns its exit status and when it was started (``time.time()``). Past
    ``limit`` s it is terminated (it kills its tree), killed 10 s later if need be, and the
    status is :data:`EXIT_TIMEOUT`.

    Raises:
        OSError: the output files or the process cannot be made.
    """
    with out_p.open("wb") as out, err_p.open("wb") as err:
        t_popen = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True)  # the terminal's Ctrl-C is kws screen's to pass on
        if on_start is not None:
            on_start(proc)
        try:
            return proc.wait(timeout=limit), t_popen
        except subprocess.TimeoutExpired:
            proc.terminate()  # the supervisor kills its tree on SIGTERM
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return EXIT_TIMEOUT, t_popen


def _judge(oc: RunOutcome, code: int, text: str) -> None:
    """Set ``oc``'s status (and report or load error) from ``kws check``'s exit status
    ``code`` and its standard output ``text`` (the JSON report); ``crash`` stays for any
    other exit."""
    doc: Any = None
    if text.strip():
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
    if code in (0, 1, 4) and isinstance(doc, dict) and "checks" in doc:
        oc.status, oc.report = "ok", doc
    elif code == 2:
        oc.status = "load-error"
        oc.error = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else None
    elif code == 3:
        oc.status = "runner-error"
    elif code == EXIT_TIMEOUT:
        oc.status = "timeout"
    elif code > 128:
        oc.status = "killed"
