"""``kws screen``: the check battery on every task version of a queue that has no result yet,
on a local pool (default) or a Ray cluster; ``kws screen --summary``: the stored results.

Exit codes of a screen: 0 every task screened got a result (whatever its findings), 1 some
runs failed for reasons that are not the task's (the runner, the cluster; they are screened
again next time), 2 bad arguments or a queue that does not load, 3 runs could not be
scheduled (e.g. GPUs no node has), 130 stopped with Ctrl-C (what finished is stored).
docs/screen.md has the whole story.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click


def _csv(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    return tuple(p.strip() for p in text.split(",") if p.strip())


@click.command("screen")
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None,
              help="The queue (a git repository with tasks/). Default: the per-user sample queue.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Runs at once. Local default: half the CPUs (at least 1); Ray default: the cluster's CPUs.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS|auto",
              help="Run on this Ray cluster (host:port, or auto: the one this machine belongs to).")
@click.option("--ray-node-ip", default=None, metavar="IP", help="This machine's address in the Ray cluster.")
@click.option("--gpus-per-task", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="GPUs each run asks Ray for.")
@click.option("--cpus-per-task", type=click.FloatRange(min=1), default=1.0, show_default=True,
              help="CPUs each run asks Ray for.")
@click.option("--timeout", type=click.FloatRange(min=1), default=1800.0, show_default=True,
              help="Seconds per kws check run (a task has one, or two with timing checks).")
@click.option("--schedule-timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Ray: give up when nothing could start for this long.")
@click.option("--force", is_flag=True, help="Screen even the task versions that have a result for this key.")
@click.option("--only", default=None, help="Comma-separated check ids (default: all).")
@click.option("--seeds", default="0,1,2", show_default=True, help="Comma-separated input seeds.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None, help="Passed to kws check --device.")
@click.option("--check-arg", "check_args", multiple=True, metavar="ARG",
              help="An extra kws check argument for every run (repeat), e.g. a sandbox flag.")
@click.option("--no-timing", is_flag=True, help="Do not run timing checks (the results say so).")
@click.option("--task", "tasks", multiple=True, metavar="ID", help="Only this task (repeat).")
@click.option("--summary", is_flag=True, help="Print the stored pre-screen of the queue; run nothing.")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True,
              help="Format of --summary.")
@click.option("--json", "as_json", is_flag=True, help="Print the screen's outcome as JSON on stdout.")
def screen_cmd(queue: Path | None, workers: int | None, ray_address: str | None, ray_node_ip: str | None,
               gpus_per_task: float, cpus_per_task: float, timeout: float, schedule_timeout: float,
               force: bool, only: str | None, seeds: str, device: str | None, check_args: tuple[str, ...],
               no_timing: bool, tasks: tuple[str, ...], summary: bool, fmt: str, as_json: bool) -> None:
    """Screen a whole queue: run the check battery on every task version without a result."""
    from workstation.repo.gitqueue import QueueError
    from workstation.repo.locate import resolve_queue

    try:
        repo = resolve_queue(queue)
        root = Path(repo.working_tree_dir or ".")
        repo.close()
    except QueueError as e:
        click.echo(f"kws: {e}", err=True)
        sys.exit(2)
    if summary:
        from workstation.screen.summary import queue_summary, to_json, to_markdown

        s = queue_summary(root)
        click.echo(to_json(s) if fmt == "json" else to_markdown(s), nl=fmt == "json")
        return
    try:
        seed_list = tuple(int(s) for s in seeds.split(",") if s.strip())
    except ValueError:
        click.echo(f"kws: --seeds {seeds!r}: expected comma-separated integers, e.g. 0,1,2", err=True)
        sys.exit(2)
    from workstation.screen.run import ScreenOptions

    opts = ScreenOptions(only=_csv(only), seeds=seed_list, device=device, check_args=tuple(check_args),
                         timeout=timeout, force=force, timing=not no_timing, tasks=tuple(tasks))
    sys.exit(_screen(root, opts, workers, ray_address, ray_node_ip, gpus_per_task, cpus_per_task,
                     schedule_timeout, as_json))


def _screen(root: Path, opts: Any, workers: int | None, ray_address: str | None, ray_node_ip: str | None,
            gpus: float, cpus: float, schedule_timeout: float, as_json: bool) -> int:
    from rich.console import Console

    from workstation.repo.gitqueue import QueueError
    from workstation.schema.problem import Problem
    from workstation.screen.run import SchedulingError, plan_screen

    console = Console(stderr=True, highlight=False)

    def warn(msg: str) -> None:
        console.print(f"[yellow]kws screen:[/] {msg}", markup=True)

    if ray_address:
        from workstation.screen.raycluster import RayBackend, RayUnavailable

        try:
            backend: Any = RayBackend(ray_address, workers=workers, gpus_per_task=gpus, cpus_per_task=cpus,
                                      schedule_timeout=schedule_timeout, node_ip=ray_node_ip, warn=warn)
        except RayUnavailable as e:
            click.echo(f"kws: {e}", err=True)
            return 2
    else:
        from workstation.screen.local import LocalPool

        if gpus:
            warn("--gpus-per-task applies to Ray runs; the local pool runs on this machine's devices")
        backend = LocalPool(workers or max(1, (os.cpu_count() or 2) // 2))
    try:
        console.print(f"kws screen: {backend.describe()}", markup=False)
        try:
            plan = plan_screen(root, backend, opts)
        except (Problem, QueueError) as e:
            click.echo(f"kws: {e}", err=True)
            return 2
        except KeyError as e:
            click.echo(f"kws: --only: {e.args[0] if e.args else e}", err=True)
            return 2
        except SchedulingError as e:
            click.echo(f"kws: {e}", err=True)
            return 3
        envs = ", ".join(sorted({e.device for e in plan.envs})) or "unknown (no node could be probed)"
        console.print(f"kws screen: {len(plan.tasks)} task(s) to screen, {len(plan.skipped)} left out; "
                      f"device: {envs}", markup=False)
        try:
            run = _with_progress(console, plan, backend, opts)
        except SchedulingError as e:
            click.echo(f"kws: {e}", err=True)
            return 3
    finally:
        backend.close()
    failed_runs = [o for o in run.outcomes if o.status in ("crash", "runner-error", "lost")]
    line = (f"kws screen: {len(run.results)} screened in {run.seconds:.1f} s: {run.count('pass')} pass, "
            f"{run.count('fail')} fail, {run.count('error', 'timeout')} error/timeout; "
            f"{len(run.not_stored)} not stored")
    console.print(line, markup=False)
    for tid, why in run.not_stored:
        console.print(f"  not stored: {tid}: {why}", markup=False)
    if run.interrupted:
        console.print("kws screen: stopped; the results above are stored, the rest is screened next time",
                      markup=False)
    if as_json:
        click.echo(json.dumps({
            "screened": [_result_json(r) for r in run.results],
            "left_out": [{"task": t, "why": w} for t, w in plan.skipped],
            "not_stored": [{"task": t, "why": w} for t, w in run.not_stored],
            "interrupted": run.interrupted,
            "seconds": round(run.seconds, 3),
            "overhead_s": {k: round(v, 4) for k, v in run.overhead.items()},
            "backend": backend.name,
            "runs": [{"job": o.job, "status": o.status, "host": o.host, "node": o.node, "seconds": round(o.seconds, 3),
                      "check_seconds": round(o.check_seconds, 3), "attempts": o.attempts,
                      "t_start": o.t_start, "t_end": o.t_end} for o in run.outcomes],
        }, indent=2))
    if run.interrupted:
        return 130
    return 1 if failed_runs else 0


def _result_json(r: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.to_builtins(r)


def _with_progress(console: Any, plan: Any, backend: Any, opts: Any) -> Any:
    """Run ``plan`` with a progress bar on stderr (tasks done / failed / errored, ETA) and
    one line per finished task above it; plain lines when stderr is not a terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from workstation.screen.run import run_plan

    counts = {"pass": 0, "fail": 0, "error": 0}
    progress = Progress(TextColumn("screening"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[counts]}"), TextColumn("ETA"), TimeRemainingColumn(),
                        console=console, transient=False, disable=not console.is_terminal)

    def label() -> str:
        return f"{counts['pass']} pass · {counts['fail']} fail · {counts['error']} error"

    bar = progress.add_task("screen", total=len(plan.tasks), counts=label())

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "warning":
            console.print(f"kws screen: {data['message']}", markup=False)
        elif kind == "finished":
            r = data["result"]
            counts["pass" if r.outcome == "pass" else "fail" if r.outcome == "fail" else "error"] += 1
            what = ", ".join(r.failing) if r.failing else (r.message[:100] if r.message else "")
            mark = "" if data["stored"] else "  (not stored)"
            console.print(f"  {r.worst:8} {r.task:<32} {r.seconds:7.1f}s  {r.host:<24} {what}{mark}", markup=False)
            progress.update(bar, advance=1, counts=label())

    with progress:
        return run_plan(plan, backend, opts, on_event=on_event)


COMMANDS = (screen_cmd,)
