"""``kws profile TASK_DIR``: which kernels and ops really ran, and what the attached
profiles say (the ``profile`` and ``profile-attached`` checks), in the terminal.

Prints what the review screen's Profile panel shows (:func:`workstation.review.profile.profile_text`):
kws's own profile of the candidate and of the baseline (or reference) on one case, each
attached profile, sorted by time per call with a bar per kernel/op, the roofline position
where bytes and FLOPs are known, and the findings. ``--json`` prints the report's
``profile`` key and the findings instead. Exit codes as ``kws check``: 0 no ``fail``
finding, 1 one, 2 the task does not load, 3 the runner failed.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from workstation.review.profile import PROFILE_CHECKS


@click.command("profile")
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report's profile key and the findings as JSON.")
@click.option("--case", "case_json", default=None, help="Profile this case (JSON table) instead of kws's choice.")
@click.option("--seed", default=0, show_default=True, help="Input seed.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Force a device (default: CUDA when present, else CPU with the Triton interpreter).")
def profile_cmd(task_dir: Path, as_json: bool, case_json: str | None, seed: int, device: str | None) -> None:
    """Profile TASK_DIR's candidate and baseline, and read its attached profiles."""
    from workstation.engine.report import dumps, exit_code, to_json_dict
    from workstation.engine.run import run_checks
    from workstation.review.profile import ProfileView, profile_text
    from workstation.runner import Runner, RunnerError
    from workstation.schema.problem import Problem
    from workstation.task.format import load_task

    try:
        task = load_task(task_dir)
        case = json.loads(case_json) if case_json else None
        if case is not None and not isinstance(case, dict):
            raise ValueError("--case must be a JSON table, e.g. '{\"N\": 1000, \"dtype\": \"float32\"}'")
    except Problem as e:
        click.echo(json.dumps({"error": e.as_dict()}) if as_json else f"kws: {e}", err=not as_json)
        sys.exit(2)
    except ValueError as e:
        click.echo(f"kws: {e}", err=True)
        sys.exit(2)
    try:
        with Runner(device=device) as runner:
            res = run_checks(task, runner, only=list(PROFILE_CHECKS), seeds=[seed], task_arg=str(task_dir), case=case)
    except RunnerError as e:
        click.echo(f"kws: the isolated runner failed: {e}", err=True)
        sys.exit(3)
    doc = to_json_dict(res)
    if as_json:
        click.echo(dumps({"task": doc["task"], "device": doc["device"], "profile": doc.get("profile", {}),
                          "findings": doc["findings"], "checks": doc["checks"]}))
    else:
        width = shutil.get_terminal_size((110, 24)).columns
        click.echo(profile_text(ProfileView.from_findings(doc["findings"]), width=width))
        for c in doc["checks"]:
            if c["status"] in ("skip", "error"):
                click.echo(f"{c['check']}: {c['status']} ({c['reason'].splitlines()[0] if c['reason'] else ''})")
    sys.exit(exit_code(doc))


COMMANDS = (profile_cmd,)
