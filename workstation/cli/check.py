"""``kws check`` (the battery on one task folder) and ``kws queue`` (a queue's tasks).

Exit codes of ``kws check`` (fail-closed, task format v1): 0 every check that applies was
judged and none has a ``fail`` finding, 1 at least one ``fail``, 2 the task could not be
loaded (the message names the file, the key and the problem) or the arguments are wrong,
3 kws itself failed (the isolated runner: bubblewrap missing or unusable, the fork server
dying), 4 no ``fail`` but a check that applies could not look (``not_judged``) or ended in
``error``: not a verdict. ``--strict`` (which made that case exit 3) is accepted, hidden,
and does nothing: it is the default now.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from workstation.task.model import Task


@click.command("check")
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the contract's JSON report (only JSON on stdout).")
@click.option("--only", default=None, help="Comma-separated check ids to run (default: all).")
@click.option("--seeds", default="0,1,2", show_default=True, help="Comma-separated input seeds.")
@click.option("--case", "case_json", default=None, help="Run on this one case (JSON table) instead of the declared ones.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Force a device (default: CUDA when present, else CPU with the Triton interpreter).")
@click.option("-v", "--verbose", is_flag=True, help="Also list info findings in the text report.")
@click.option("--timings", is_flag=True,
              help="Also print where each check's time went: wall, CPU (its parent thread and its jobs), "
                   "waiting, queued for a runner slot, jobs (the JSON report always holds them, per check).")
@click.option("--no-sandbox", "no_sandbox", is_flag=True,
              help="Run task code without the bubblewrap sandbox (it can then read your files and keys); "
                   "the report records sandbox: none. Also: sandbox = \"none\" in ~/.config/kws/config.toml.")
@click.option("--strict", is_flag=True, hidden=True,
              help="Deprecated, no effect: kws check exits 4 whenever a check could not judge.")
def check_cmd(task_dir: Path, as_json: bool, only: str | None, seeds: str, case_json: str | None,
              device: str | None, verbose: bool, timings: bool, no_sandbox: bool, strict: bool) -> None:
    """Run the check battery on TASK_DIR and report findings.

    Exit 0 only when every check that applies was judged and none failed; 1 a fail; 2 the
    task did not load; 3 kws failed; 4 no fail, but a check could not look."""
    if strict:
        click.echo("kws: --strict is deprecated and has no effect: kws check is fail-closed "
                   "(exit 4 when a check could not judge)", err=True)
    from workstation.engine.report import dumps, exit_code, to_json_dict, to_text
    from workstation.engine.run import run_checks, select_checks
    from workstation.runner import Runner, RunnerError
    from workstation.runner.policy import sandbox_mode
    from workstation.schema.problem import Problem
    from workstation.task.format import load_task

    try:
        task_dir = _task_folder(task_dir, as_json)
    except _OptionError as e:
        _fail_load(str(e), {"file": str(task_dir), "key": e.option, "problem": e.problem}, as_json)
        return
    try:
        task = load_task(task_dir)
    except Problem as e:
        _fail_load(str(e), e.as_dict(), as_json)
        return
    try:
        ids = select_checks(only.split(",") if only else None, task)
        seed_list = _parse_seeds(seeds)
        case = _parse_case(case_json, task) if case_json else None
        if device == "cuda":
            _require_cuda()
    except KeyError as e:
        msg = f"--only: {e.args[0] if e.args else e}"
        _fail_load(msg, {"file": "", "key": "--only", "problem": msg}, as_json)
        return
    except _OptionError as e:
        _fail_load(str(e), {"file": "", "key": e.option, "problem": e.problem}, as_json)
        return
    stop = _Interrupt()
    progress = stop.progress if not as_json and sys.stderr.isatty() else None
    try:
        mode = sandbox_mode("none" if no_sandbox else None)
    except Problem as e:
        _fail_load(str(e), e.as_dict(), as_json)
        return
    try:
        with Runner(device=device, sandbox=mode) as runner, stop.installed(runner):
            res = run_checks(task, runner, only=ids, seeds=seed_list, on_event=progress,
                             task_arg=str(task_dir), case=case)
    except Problem as e:
        _fail_load(str(e), e.as_dict(), as_json)
        return
    except RunnerError as e:
        if as_json:
            click.echo(json.dumps({"error": {"file": "", "key": "", "problem": f"the isolated runner failed: {e}"},
                                   "runner_failed": True}))
        click.echo(f"kws: the isolated runner failed: {e}", err=True)
        sys.exit(3)
    doc = to_json_dict(res)
    text = dumps(doc) if as_json else to_text(doc, verbose=verbose)
    if timings and not as_json:
        from workstation.engine.costs import timings_table

        text += "\n\n" + "\n".join(timings_table(doc["checks"], float(doc["seconds"])))
    click.echo(text)
    sys.exit(exit_code(doc))


_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _task_folder(arg: Path, quiet: bool) -> Path:
    """The task folder ``kws check`` runs on: ``arg`` when it exists; else, when ``arg`` is
    a task id, ``tasks/<id>`` of the current queue (the clone you are in, else ``kws
    --queue``, else the ``queue`` setting, else the per-user sample queue when it exists),
    said on stderr unless ``quiet``.

    Raises:
        _OptionError: neither: the message names the folder and the nearest task ids or
            folder names (``did you mean``).
    """
    if arg.exists():
        return arg
    from workstation.repo.gitqueue import QueueError, missing_folder, near_names
    from workstation.repo.locate import find_queue

    root: Path | None = None
    try:
        root = find_queue(_group_queue(), make=False).root
    except QueueError:
        root = None
    text = str(arg)
    if root is not None and _TASK_ID.match(text):
        cand = root / "tasks" / text
        if (cand / "task.toml").is_file():
            if not quiet:
                click.echo(f"kws: task {text} of the queue {root}", err=True)
            return cand
    near = near_names(arg.name, root / "tasks") if root is not None and (root / "tasks").is_dir() else []
    if near:
        raise _OptionError("TASK_DIR", f"{text}: no such folder, and no task {arg.name!r} in the queue {root}; "
                                       f"did you mean {', '.join(near)}?")
    msg = missing_folder(arg)
    if root is not None and _TASK_ID.match(text):
        msg += f", and no task {text!r} in the queue {root} (kws queue lists its tasks)"
    raise _OptionError("TASK_DIR", msg)


#: the exit status of a ``kws check`` stopped by ctrl+c (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130


class _Interrupt:
    """Ctrl+C (SIGINT) during ``kws check``: nothing more is printed, the fork server and
    its jobs are stopped (at most :attr:`CLOSE_WAIT` seconds), and the process exits with
    :data:`EXIT_INTERRUPTED`, never 1 (a fail finding) nor the results of checks the
    interrupted run left half done. The progress lines go through :meth:`progress`, under
    the same lock, so none is printed after the interrupt."""

    #: seconds the fork server is given to stop before the process exits anyway.
    CLOSE_WAIT = 5.0

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.stopped = False

    def progress(self, kind: str, data: dict[str, Any]) -> None:
        """``kws check``'s progress on a terminal: one stderr line per finished check."""
        if kind == "check_finished":
            r = data["result"]
            with self.lock:
                if not self.stopped:
                    click.echo(f"  {r.check:<18} {r.status:5} {r.seconds:6.2f}s", err=True)

    def installed(self, runner: Any) -> Any:
        """A context in which SIGINT stops the run (:meth:`_stop`); the previous handler
        comes back after it."""
        import contextlib
        import signal

        @contextlib.contextmanager
        def ctx() -> Any:
            before = signal.signal(signal.SIGINT, lambda *_: self._stop(runner))
            try:
                yield
            finally:
                signal.signal(signal.SIGINT, before)

        return ctx()

    def _stop(self, runner: Any) -> None:
        """(The SIGINT handler, in the main thread.) Silence the progress, stop the fork
        server in a helper thread (bounded by :attr:`CLOSE_WAIT`), exit 130 at once:
        ``os._exit``, so no worker thread of the run prints or judges anything more."""
        import os
        import threading

        self.lock.acquire(timeout=1.0)
        self.stopped = True
        with _quiet_errors():
            sys.stdout.flush()
            sys.stderr.flush()
        closer = threading.Thread(target=runner.close, daemon=True)
        closer.start()
        closer.join(self.CLOSE_WAIT)
        os._exit(EXIT_INTERRUPTED)


def _quiet_errors() -> Any:
    """A context that swallows OSError (a closed terminal while flushing)."""
    import contextlib

    return contextlib.suppress(OSError, ValueError)


class _OptionError(ValueError):
    """A bad command-line value: ``option`` names it, ``problem`` says what is wrong."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"{option}: {problem}")
        self.option, self.problem = option, problem


def _parse_seeds(text: str) -> list[int]:
    """``--seeds``: comma-separated non-negative integers."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise _OptionError("--seeds", f"{part!r} is not an integer (comma-separated integers, e.g. 0,1,2)") from None
        if not 0 <= v < 2**63:
            raise _OptionError("--seeds", f"{v} is out of range (0 to 2**63 - 1)")
        out.append(v)
    if not out:
        raise _OptionError("--seeds", "no seed given (comma-separated integers, e.g. 0,1,2)")
    return out


def _parse_case(text: str, task: Task) -> dict[str, Any]:
    """``--case``: a JSON table naming exactly the task's case parameters (those its
    declared cases and ``[params]`` use), with values ``[params]`` allows."""
    try:
        case = json.loads(text)
    except json.JSONDecodeError as e:
        raise _OptionError("--case", f"not valid JSON ({e.msg} at column {e.colno}): {text!r}") from None
    if not isinstance(case, dict):
        raise _OptionError("--case", 'must be a JSON table, e.g. \'{"N": 1000, "dtype": "float32"}\'')
    cases = [dict(c) for c in task.cases]
    params = task.params
    known = {k for c in cases for k in c} | set(params)
    unknown = sorted(set(case) - known)
    if unknown:
        raise _OptionError("--case", f"unknown case parameter(s) {', '.join(map(repr, unknown))}; "
                                     f"the cases of {task.id} take {', '.join(sorted(known))}")
    needed = set.intersection(*(set(c) for c in cases)) if cases else set()
    missing = sorted(needed - set(case))
    if missing:
        raise _OptionError("--case", f"missing {', '.join(missing)} (every declared case of "
                                     f"{task.id} sets it)")
    for k, v in case.items():
        spec = params.get(k)
        if spec is not None and not spec.allows(v):
            raise _OptionError("--case", f"{k}={v!r} is not allowed by [params] ({spec.describe()})")
    return case


def _require_cuda() -> None:
    """``--device cuda`` needs a CUDA device: asked of torch in a child process (this
    process never imports torch)."""
    import subprocess

    code = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise _OptionError("--device", "cuda: could not ask torch for a CUDA device (timed out)") from None
    if r.returncode != 0:
        raise _OptionError("--device", "cuda: no CUDA device on this machine (torch.cuda.is_available() is "
                                       "false); leave --device out to run on the CPU")


def _fail_load(message: str, data: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"error": data}))
    click.echo(f"kws: {message}", err=True)
    sys.exit(2)


@click.group("queue", invoke_without_command=True)
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None,
              help="The queue (default: the clone you are in, else the queue setting, else the sample queue).")
@click.pass_context
def queue_cmd(ctx: click.Context, queue: Path | None) -> None:
    """List the tasks of a queue and the tasks that do not load; kws queue init starts a
    shared queue."""
    if ctx.invoked_subcommand is not None:
        return
    from workstation.repo.gitqueue import QueueError
    from workstation.repo.locate import find_queue
    from workstation.schema.problem import Problem
    from workstation.task.queue import load_queue

    try:
        root = find_queue(queue or _group_queue()).root
        q = load_queue(root)
    except (Problem, QueueError) as e:
        click.echo(f"kws: {e}", err=True)
        sys.exit(2)
    click.echo(f"{q.name}: {len(q.tasks)} tasks at {q.root}")
    for t in q.tasks:
        click.echo(f"  {t.id:<32} {t.kind:<13} {t.backend:<7} claims {t.claims.status}")
    for err in q.errors:
        click.echo(f"  ! {err}")
    for w in q.warnings:
        click.echo(f"  warning: {w}")
    sys.exit(2 if q.errors else 0)


def _group_queue() -> Path | None:
    """The ``--queue`` given to ``kws`` itself (``kws --queue PATH queue``), or None."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    given = root.params.get("queue") if root is not None else None
    return Path(given) if given is not None else None


@queue_cmd.command("init")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--remote", default=None, metavar="PATH|URL",
              help="The shared remote to push to: a new folder becomes a bare repository whose HEAD names main; "
                   "an existing local bare repository gets its HEAD pointed at main; a URL is pushed to as is.")
@click.option("--name", default=None, help="The queue's name (default: the folder's name).")
@click.option("--signatures", type=click.Choice(["required", "off"]), default="required", show_default=True,
              help="Whether only signed records count (off: a queue whose records are not signed).")
@click.option("--signer", "signers", multiple=True, metavar="LINE",
              help="Another reviewer's allowed-signers line (what kws signing setup prints them; repeatable). "
                   "Your own key is added for you.")
@click.option("--tasks", "tasks_from", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Copy these task folders into tasks/ (a folder of task folders, or a queue).")
def queue_init_cmd(folder: Path, remote: str | None, name: str | None, signatures: str, signers: tuple[str, ...],
                   tasks_from: Path | None) -> None:
    """Start a shared queue in FOLDER: a git repository on main with queue.toml, tasks/ and
    (signatures required) the allowed signers, committed in one signed commit, pushed to
    --remote; prints what each reviewer runs (docs/records.md, "A team's queue")."""
    import git

    from workstation.records.model import RecordError
    from workstation.records.team import init_queue
    from workstation.repo.gitqueue import QueueError, reviewer_identity

    try:
        who = reviewer_identity(None)
        res = init_queue(folder, who, name=name, remote=remote, signatures=signatures, signers=list(signers),
                         tasks_from=tasks_from)
    except (RecordError, QueueError) as e:
        raise click.ClickException(str(e)) from e
    except git.GitCommandError as e:
        err = e.stderr if isinstance(e.stderr, str) else ""
        raise click.ClickException(f"git failed: {' '.join(err.replace('stderr:', '').split())[-400:] or e}") from e
    click.echo(f"made the queue {res.root} on branch main as {who}"
               + (f", first commit signed; allowed signers: {', '.join(ln.split(' ', 1)[0] for ln in res.signers)}"
                  if res.signed else "; records are not signed in it"))
    if res.remote is not None:
        click.echo(f"pushed main to {res.remote} (origin); main tracks origin/main")
    for n in res.notes:
        click.echo(f"note: {n}")
    click.echo("each reviewer runs:")
    for step in res.reviewer_steps():
        click.echo(f"  {step}")


COMMANDS = (check_cmd, queue_cmd)
