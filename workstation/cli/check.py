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
@click.option("--no-sandbox", "no_sandbox", is_flag=True,
              help="Run task code without the bubblewrap sandbox (it can then read your files and keys); "
                   "the report records sandbox: none. Also: sandbox = \"none\" in ~/.config/kws/config.toml.")
@click.option("--strict", is_flag=True, hidden=True,
              help="Deprecated, no effect: kws check exits 4 whenever a check could not judge.")
def check_cmd(task_dir: Path, as_json: bool, only: str | None, seeds: str, case_json: str | None,
              device: str | None, verbose: bool, no_sandbox: bool, strict: bool) -> None:
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
    progress = _progress if not as_json and sys.stderr.isatty() else None
    try:
        mode = sandbox_mode("none" if no_sandbox else None)
    except Problem as e:
        _fail_load(str(e), e.as_dict(), as_json)
        return
    try:
        with Runner(device=device, sandbox=mode) as runner:
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
    click.echo(dumps(doc) if as_json else to_text(doc, verbose=verbose))
    sys.exit(exit_code(doc))


def _progress(kind: str, data: dict[str, Any]) -> None:
    """``kws check``'s progress on a terminal: one stderr line per finished check."""
    if kind == "check_finished":
        r = data["result"]
        click.echo(f"  {r.check:<18} {r.status:5} {r.seconds:6.2f}s", err=True)


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


@click.command("queue")
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None)
def queue_cmd(queue: Path | None) -> None:
    """List the tasks of a queue and the tasks that do not load."""
    from workstation.schema.problem import Problem
    from workstation.task.queue import load_queue

    root = queue or _default_queue()
    try:
        q = load_queue(root)
    except Problem as e:
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


def _default_queue() -> Path:
    from workstation.repo.gitqueue import ensure_default_queue

    return Path(ensure_default_queue())


COMMANDS = (check_cmd, queue_cmd)
