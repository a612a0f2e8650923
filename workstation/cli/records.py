"""The record commands of ``kws``: verdict, sync, reserve, release, history, dispute,
resolve, recheck, calibrate, report, doctor, signing setup.

``workstation.cli.main`` adds :data:`COMMANDS` to its top-level click group. Every command
takes ``--queue PATH`` (default: the one given to ``kws`` itself, else the clone holding
the current folder, else the ``queue`` setting, else the first-run copy of the sample queue:
:func:`workstation.repo.locate.find_queue`); a command that writes a record first says
where and as whom (:func:`_announce`). Errors print one message naming the
problem and the fix, and exit with status 1; nothing is committed then, and an unsent
verdict stays in its draft. A command that promises to reach the remote (sync, reserve,
release) exits 1 when it did not, with git's own message. What kws's recovery repaired
before a command (a stale git lock, an interrupted update) is printed on stderr as
``kws: recovered: ...``.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click
import git

from workstation.records.drafts import Draft, draft_path, save_draft
from workstation.records.history import format_history, task_history
from workstation.records.model import OUTCOMES, Verdict
from workstation.records.parse import load_records
from workstation.records.state import RecordSet, same_reviewer
from workstation.records.store import (
    commit_dispute,
    commit_resolution,
    commit_verdict,
    release,
    reserve,
)
from workstation.records.sync import SyncError, sync
from workstation.repo.gitqueue import QueueError, open_queue, reviewer_identity, task_version
from workstation.repo.locate import QueueChoice, find_queue
from workstation.repo.plumbing import storage_advice, storage_fault
from workstation.rubric.model import (
    Rubric,
    field_values_from_pairs,
    find_rubric,
    queue_rubric,
)
from workstation.rubric.suggest import suggest
from workstation.schema.problem import Problem

__all__ = ["COMMANDS"]

_queue_option = click.option(
    "--queue",
    "queue",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The queue (a git repository). Default: the clone you are in, else the queue setting, else the "
         "per-user sample queue.",
)


class _StderrNotes(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"kws: {record.getMessage()}", err=True)


def _log_recoveries() -> None:
    """Print the repository's recovery notes and the records' warnings (a clock that looks
    off, conflicting resolutions met by a sync) on stderr, prefixed ``kws: ``."""
    for name in ("workstation.repo", "workstation.records"):
        log = logging.getLogger(name)
        if not any(isinstance(h, _StderrNotes) for h in log.handlers):
            log.addHandler(_StderrNotes(logging.INFO))
            log.setLevel(logging.INFO)
            log.propagate = False


def _fails_cleanly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn kws's own errors into one clear message and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _log_recoveries()
        try:
            return fn(*args, **kwargs)
        except (QueueError, Problem) as exc:
            raise click.ClickException(str(exc)) from exc
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
        except git.GitCommandError as exc:
            fault = storage_fault(exc)
            if fault is not None:
                raise click.ClickException(f"git could not write: {storage_advice(fault, Path.cwd())} "
                                           f"({_last_line(exc.stderr)})") from exc
            raise click.ClickException(f"git failed: {exc}") from exc
        except OSError as exc:
            fault = storage_fault(exc)
            if fault is None:
                raise
            where = exc.filename or Path.cwd()
            raise click.ClickException(f"cannot write {where}: {exc.strerror}; {storage_advice(fault, where)}") from exc

    return wrapper


def _last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip().strip("'") for ln in str(text or "").replace("stderr:", "").splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else ""


def queue_param(queue: Path | None) -> Path | None:
    """The queue a sub-command was given: its own ``--queue``, else the one given to
    ``kws`` itself (``kws --queue PATH doctor``), else None (:func:`find_queue` decides)."""
    if queue is not None:
        return queue
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    given = root.params.get("queue") if root is not None else None
    return Path(given) if given is not None else None


def _open(queue: Path | None, *, write: bool = False, record: str | None = None) -> git.Repo:
    """The queue's repository (:func:`~workstation.repo.locate.find_queue`: ``--queue``,
    else the clone you are in, else the ``queue`` setting, else the per-user sample queue),
    after kws's recovery ran under its lock (so a command that only reads also repairs what
    an interrupted command left, and says so). Where the clone cannot be written (a
    read-only mount, a full disk), a command that only reads (``write`` False) goes on with
    a note; one that must write stops here with
    :class:`~workstation.repo.plumbing.StorageError` (nothing changed). ``record``: the
    kind of record the command writes; the queue, branch, identity and signing key it
    writes with are printed first (:func:`_announce`).

    Raises:
        QueueError: no such queue, a damaged branch, or (``write``) a clone kws cannot lock.
    """
    from workstation.repo.lock import damaged_branch, queue_lock

    choice = find_queue(queue_param(queue))
    repo = open_queue(choice.root)
    damage = damaged_branch(repo)
    if damage is not None:
        raise QueueError(damage)
    with queue_lock(repo, write=write):
        pass
    if record is not None:
        _announce(repo, choice, record)
    return repo


def _announce(repo: git.Repo, choice: QueueChoice, record: str) -> None:
    """Say on stderr where a ``record`` is about to be written: the queue (and why that
    one), its branch, the git identity and the signing key; a write to the per-user sample
    queue because no queue was named and the folder is no queue's clone is said so."""
    from workstation.records.signing import records_policy, signing_key
    from workstation.repo.gitqueue import IdentityError, head_branch

    try:
        who = str(reviewer_identity(repo))
    except IdentityError:
        who = "no git identity (refused below)"
    key = signing_key(repo)
    policy = records_policy(repo)
    if key is not None:
        signing = f"signing with {key}"
    elif policy.off:
        signing = "unsigned (this queue does not check signatures)"
    else:
        signing = "no signing key (kws signing setup)"
    click.echo(f"kws: {record} -> queue {choice.root} ({choice.how}), branch {head_branch(repo) or '(detached)'}, "
               f"as {who}, {signing}", err=True)
    if choice.sample:
        click.echo(f"kws: note: you are not inside a queue's clone and gave no --queue, so this {record} goes to "
                   f"the per-user sample queue; for your team's queue, cd into its clone or give --queue PATH",
                   err=True)


def _root(repo: git.Repo) -> Path:
    """The queue's folder: the work tree of ``repo``.

    Raises:
        QueueError: ``repo`` is bare (a queue is a work tree).
    """
    if repo.working_tree_dir is None:
        raise QueueError(f"{repo.git_dir}: a bare repository, not a queue")
    return Path(repo.working_tree_dir)


def _no_task(task: str, root: Path) -> str:
    """``no task 'x' in ROOT``, with the nearest task ids (``did you mean``)."""
    from workstation.repo.gitqueue import near_names

    near = near_names(task, root / "tasks")
    return (f"no task {task!r} and no records of it in {root}"
            + (f"; did you mean {', '.join(near)}?" if near else " (kws queue lists its tasks)"))


def _problems(rs: RecordSet) -> None:
    for p in rs.problems:
        click.echo(f"kws: skipped {p}", err=True)


def _rubric_for(root: Path, rubric_id: str) -> Rubric | None:
    try:
        return find_rubric(rubric_id, root)
    except Problem as exc:
        click.echo(f"kws: warning: {exc}; field values are not checked against it", err=True)
        return None


# ------------------------------------------------------------------------------------------


@click.command("verdict")
@click.argument("task")
@click.option("--overall", type=click.Choice(["accept", "reject", "needs-work"]), required=True)
@click.option("--field", "fields", multiple=True, metavar="KEY=VALUE", help="A rubric field value (repeatable).")
@click.option("--rationale", default="", help="Why (required to reject).")
@click.option("--with-checks", is_flag=True, help="Run the checks first and record their findings.")
@click.option(
    "--accept-suggestions",
    is_flag=True,
    help="With --with-checks: fill fields not given with kws's suggestions.",
)
@_queue_option
@_fails_cleanly
def verdict_cmd(
    task: str,
    overall: str,
    fields: tuple[str, ...],
    rationale: str,
    with_checks: bool,
    accept_suggestions: bool,
    queue: Path | None,
) -> None:
    """Commit a verdict on TASK without the review app.

    Runs no checks unless --with-checks. The verdict is a new file under
    verdicts/TASK/ and one git commit; run `kws sync` to share it.
    """
    if accept_suggestions and not with_checks:
        raise click.UsageError("--accept-suggestions needs --with-checks (suggestions come from findings)")
    repo = _open(queue, record="verdict")
    root = _root(repo)
    rubric = queue_rubric(root)
    values = field_values_from_pairs(rubric, fields)
    for k in ("overall", rubric.rationale_field):
        if k in values:
            raise click.UsageError(f"give {k} with --{k}, not --field")
    values["overall"] = overall
    if rationale:
        values[rubric.rationale_field] = rationale
    tv = task_version(repo, task)
    if tv.tree is None:
        from workstation.repo.gitqueue import near_names

        near = near_names(task, root / "tasks")
        raise click.ClickException(f"no task {task!r} in HEAD of {root}"
                                   + (f"; did you mean {', '.join(near)}?" if near else ""))
    draft = Draft(task=task, queue=str(root), values=values, rubric_id=rubric.id, rubric_version=rubric.version)
    if with_checks:
        draft.report = _check_report(root, task)
        draft.task_tree = tv.tree
        if accept_suggestions:
            _accept_suggestions(rubric, draft.report, values)
    kept = _keep_draft(draft, root, task)
    try:
        v = commit_verdict(repo, draft, rubric)
    except QueueError as exc:
        raise click.ClickException(f"{exc}\n{kept}") from exc
    click.echo(f"committed verdict {v.verdict_id} ({v.overall}) on {task}")
    click.echo(f"  {v.path}")
    click.echo(f"  task version {v.task_tree}; commit {repo.head.commit.hexsha[:12]}; run kws sync to share it")


def _check_report(root: Path, task: str) -> dict[str, Any]:
    """The battery's report on ``task`` of the queue at ``root`` (``kws verdict --with-checks``).

    Raises:
        click.ClickException: the engine is not installed, or the checks could not run.
    """
    try:
        from workstation.engine.run import check_task
    except ImportError as exc:
        raise click.ClickException(f"the check engine is not available: {exc}") from exc
    click.echo(f"kws: running the checks on {task} ...", err=True)
    try:
        return dict(check_task(root / "tasks" / task))
    except Exception as exc:  # a task that does not load (Problem names file and key)
        raise click.ClickException(f"the checks could not run on {task}: {exc}") from exc


def _accept_suggestions(rubric: Rubric, report: Mapping[str, Any], values: dict[str, str]) -> None:
    """Fill the fields of ``values`` not given with the rubric's suggestions from
    ``report``'s findings, each told on stderr."""
    for key, s in suggest(rubric, report.get("findings") or [], report.get("checks") or [],
                          report.get("not_judged") or []).items():
        if key not in values and s.value is not None:
            values[key] = s.value
            click.echo(f"kws: {key} = {s.value} (suggested: {s.reason})", err=True)


def _keep_draft(draft: Draft, root: Path, task: str) -> str:
    """Save ``draft`` before the commit (a refused commit keeps what was given) and return
    the line that says where the verdict is kept; a failed save is warned about on stderr
    (with storage advice) and the line says the values are only on the command line."""
    try:
        save_draft(draft)
    except OSError as exc:
        fault = storage_fault(exc)
        where = draft_path(root, task).parent
        click.echo(f"kws: warning: the draft could not be saved in {where}: {exc.strerror}"
                   + (f"; {storage_advice(fault, where)}" if fault else "") + "; committing without it", err=True)
        return (f"your verdict was NOT saved as a draft ({where}: {exc.strerror}); the values are only in "
                "this command line: run it again once the commit can succeed")
    return f"your verdict is saved as a draft: {draft_path(root, task)}"


@click.command("sync")
@click.option("--attempts", type=click.IntRange(1, 50), default=6, show_default=True,
              help="Fetch-rebase-push rounds before giving up on a remote that keeps moving.")
@_queue_option
@_fails_cleanly
def sync_cmd(attempts: int, queue: Path | None) -> None:
    """Pull (rebase) and push the queue's records; never forces."""
    repo = _open(queue, write=True, record="sync")
    click.echo(str(sync(repo, attempts=attempts)))


def _share(repo: git.Repo, no_sync: bool) -> bool:
    """Sync after a reservation; exits 1 (ClickException) when a configured remote was not
    reached: the command promised to tell others."""
    if no_sync or not repo.remotes:
        if not repo.remotes:
            click.echo("kws: this queue has no remote; the record is local", err=True)
        return False
    try:
        click.echo(str(sync(repo)))
        return True
    except SyncError as exc:
        raise click.ClickException(
            f"committed locally but NOT shared: {exc}\nother reviewers do not see it until a kws sync succeeds"
        ) from exc


@click.command("reserve")
@click.argument("task")
@click.option("--hours", type=click.FloatRange(min=0, min_open=True, max=336), default=4.0, show_default=True)
@click.option("--no-sync", is_flag=True, help="Commit locally only; do not sync.")
@_queue_option
@_fails_cleanly
def reserve_cmd(task: str, hours: float, no_sync: bool, queue: Path | None) -> None:
    """Reserve TASK for HOURS so that other reviewers see it taken, then sync."""
    repo = _open(queue, write=True, record="reservation")
    who = reviewer_identity(repo)
    r = reserve(repo, task, hours, identity=who)
    click.echo(f"reserved {task} until {r.expires:%Y-%m-%d %H:%MZ}")
    if _share(repo, no_sync):
        holder = load_records(_root(repo), ("reservation",)).reservation(task)
        if holder is not None and holder.reviewer.email.lower() != who.email.lower():
            raise click.ClickException(
                f"{holder.reviewer} reserved {task} first (until {holder.expires:%Y-%m-%d %H:%MZ}); "
                "yours does not hold"
            )


@click.command("release")
@click.argument("task")
@click.option("--no-sync", is_flag=True, help="Commit locally only; do not sync.")
@_queue_option
@_fails_cleanly
def release_cmd(task: str, no_sync: bool, queue: Path | None) -> None:
    """Release your reservation of TASK, then sync."""
    repo = _open(queue, write=True, record="release")
    release(repo, task)
    click.echo(f"released {task}")
    _share(repo, no_sync)


@click.command("history")
@click.argument("task")
@_queue_option
@_fails_cleanly
def history_cmd(task: str, queue: Path | None) -> None:
    """Every verdict, dispute and resolution on TASK, oldest first."""
    repo = _open(queue)
    rs = load_records(_root(repo))
    h = task_history(repo, task, rs)
    if not h.entries and h.head.tree is None and not h.problems:
        raise click.ClickException(_no_task(task, _root(repo)))
    click.echo(format_history(h, rs))
    _unpushed_line(repo)


def _unpushed_line(repo: git.Repo) -> None:
    """``N records not pushed`` when this clone holds record commits its remote lacks."""
    from workstation.records.sync import unpushed_records

    n = unpushed_records(repo)
    if n:
        click.echo(f"{n} records not pushed: they are in this clone only; run kws sync to share them")


def _share_record(repo: git.Repo, no_sync: bool, *, hold_conflicts: bool = False) -> None:
    """Sync after a dispute or resolution, as after a reservation: exits 1 when a configured
    remote was not reached (the record stays committed here and a later sync sends it),
    or when the remote already holds a resolution that disagrees (``hold_conflicts``:
    nothing is pushed until the writer decides)."""
    if no_sync or not repo.remotes:
        if not repo.remotes:
            click.echo("kws: this queue has no remote; the record is local", err=True)
        else:
            _unpushed_line(repo)
        return
    try:
        click.echo(str(sync(repo, hold_conflicts=hold_conflicts)))
    except SyncError as exc:
        if exc.kind == "resolution-conflict":
            raise click.ClickException(str(exc)) from exc
        raise click.ClickException(
            f"committed locally but NOT shared: {exc}\nother reviewers do not see it until a kws sync succeeds"
        ) from exc


@click.command("dispute")
@click.argument("verdict_id")
@click.option("--field", "fields", multiple=True, required=True, metavar="KEY=VALUE",
              help="Your value for a field of the verdict (repeatable).")
@click.option("--rationale", required=True, help="Why the verdict is wrong on these fields.")
@click.option("--no-sync", is_flag=True, help="Commit locally only; do not sync.")
@_queue_option
@_fails_cleanly
def dispute_cmd(verdict_id: str, fields: tuple[str, ...], rationale: str, no_sync: bool, queue: Path | None) -> None:
    """Dispute fields of the verdict VERDICT_ID (its id or a unique prefix), then sync."""
    repo = _open(queue, write=True, record="dispute")
    root = _root(repo)
    rs = load_records(root)
    v = rs.verdict(verdict_id)
    rubric = _rubric_for(root, v.rubric_id)
    if rubric is not None:
        values = field_values_from_pairs(rubric, fields)
    else:
        values = dict(p.partition("=")[::2] for p in fields)
    d = commit_dispute(repo, v, values, rationale, rubric)
    click.echo(f"committed dispute {d.dispute_id} of verdict {v.verdict_id[:8]} on {v.task}")
    click.echo(f"  {d.path}")
    _share_record(repo, no_sync)


@click.command("resolve")
@click.argument("dispute_id")
@click.option("--outcome", type=click.Choice(OUTCOMES), required=True,
              help="What happens to the disputed verdict: upheld (stands), overturned (the "
                   "dispute's values replace it), amended (your --field values replace it).")
@click.option("--field", "fields", multiple=True, metavar="KEY=VALUE", help="With amended: the new values.")
@click.option("--rationale", required=True, help="The adjudication, citing both sides.")
@click.option("--supersede", is_flag=True, help="Replace an earlier resolution of this dispute.")
@click.option("--no-sync", is_flag=True, help="Commit locally only; do not sync.")
@_queue_option
@_fails_cleanly
def resolve_cmd(
    dispute_id: str,
    outcome: str,
    fields: tuple[str, ...],
    rationale: str,
    supersede: bool,
    no_sync: bool,
    queue: Path | None,
) -> None:
    """Resolve the dispute DISPUTE_ID (its id or a unique prefix), then sync; a resolution
    that disagrees with one the remote already has is held back, and you are told."""
    repo = _open(queue, write=True, record="resolution")
    root = _root(repo)
    rs = load_records(root)
    d = rs.dispute(dispute_id)
    v = rs.verdict(d.verdict_id)
    rubric = _rubric_for(root, v.rubric_id)
    values = field_values_from_pairs(rubric, fields) if rubric is not None else dict(
        p.partition("=")[::2] for p in fields
    )
    who = reviewer_identity(repo)
    if same_reviewer(d.reviewer, who):
        click.echo("kws: note: you raised the dispute; the resolution records that", err=True)
    r = commit_resolution(repo, rs, d, outcome, rationale, values, rubric, identity=who, supersede=supersede)
    click.echo(f"committed resolution {r.resolution_id}: verdict {v.verdict_id[:8]} {outcome}")
    if r.fields:
        click.echo("  verdict now: " + ", ".join(f"{k}={val}" for k, val in r.fields.items()))
    click.echo(f"  {r.path}")
    _share_record(repo, no_sync, hold_conflicts=True)


@click.command("recheck")
@click.argument("verdict_id")
@click.option("-v", "--verbose", is_flag=True, help="Also list info findings that differ.")
@_queue_option
@_fails_cleanly
def recheck_cmd(verdict_id: str, verbose: bool, queue: Path | None) -> None:
    """Re-run the checks on the task version VERDICT_ID judged; show what differs."""
    from workstation.records.recheck import format_recheck, recheck

    repo = _open(queue)
    rs = load_records(_root(repo))
    v = rs.verdict(verdict_id)
    try:
        import workstation.engine.run  # noqa: F401  (fail early with a clear message)
    except ImportError as exc:
        raise click.ClickException(f"the check engine is not available: {exc}") from exc
    click.echo(f"kws: checking {v.task} at version {v.task_tree[:10]} ...", err=True)
    try:
        _, diff = recheck(repo, v)
    except QueueError:
        raise
    except Exception as exc:  # a task version that does not load (Problem names file and key)
        raise click.ClickException(f"the checks could not run on version {v.task_tree[:10]}: {exc}") from exc
    click.echo(format_recheck(v, diff, verbose))


@click.command("calibrate")
@_queue_option
@_fails_cleanly
def calibrate_cmd(queue: Path | None) -> None:
    """Agreement with gold verdicts per reviewer and field; Krippendorff's alpha per field."""
    from workstation.records.calibration import calibrate, format_calibration  # numpy: only here

    repo = _open(queue)
    root = _root(repo)
    click.echo(format_calibration(calibrate(root, queue_rubric(root))))


@click.command("report")
@click.argument("task")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the Markdown here instead of stdout.")
@click.option("--verdict", "verdict_id", default=None, help="A verdict id (default: the task's latest).")
@_queue_option
@_fails_cleanly
def report_cmd(task: str, output: Path | None, verdict_id: str | None, queue: Path | None) -> None:
    """A Markdown report of TASK's verdict with its evidence."""
    from workstation.records.report import render_report

    repo = _open(queue)
    root = _root(repo)
    rs = load_records(root)
    _problems(rs)
    v: Verdict | None
    if verdict_id:
        v = rs.verdict(verdict_id)
        if v.task != task:
            raise click.ClickException(f"verdict {verdict_id} is on {v.task}, not {task}")
    else:
        v = rs.current_verdict(task)
        if v is None:
            unverified = rs.unverified_for(task, ("verdict",))
            if not unverified and task_version(repo, task).tree is None and task not in rs.task_ids():
                raise click.ClickException(_no_task(task, root))
            raise click.ClickException(
                f"no verdict on {task!r} in {root}" + (
                    f": {len(unverified)} unverified, so not counted ({unverified[-1].why}; kws history {task})"
                    if unverified else " yet"))
    rubric = _rubric_for(root, v.rubric_id)
    md = render_report(repo, rs, v, rubric)
    if output is None:
        sys.stdout.write(md)
    else:
        try:
            output.write_text(md, encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or str(exc)
            if not output.parent.is_dir():
                why = f"the folder {output.parent} does not exist"
            raise click.ClickException(f"cannot write the report to {output}: {why}; nothing was written "
                                       "(give -o a path in an existing, writable folder, or leave it out for stdout)"
                                       ) from exc
        click.echo(f"wrote {output}")


@click.command("doctor")
@_queue_option
@_fails_cleanly
def doctor_cmd(queue: Path | None) -> None:
    """What needs attention in this clone: files under the record folders that are not
    committed records, skipped records and tasks, unknown keys, git state, unsent commits,
    and (as warnings) the entries of the user keymap that kws ignores. Exits 1 when it
    found a problem."""
    from workstation import settings
    from workstation.records.doctor import diagnose
    from workstation.settings.show import summary

    choice = find_queue(queue_param(queue))
    repo = open_queue(choice.root)  # diagnose takes the lock and names a damaged branch itself
    d = diagnose(repo)
    d.notes.insert(0, f"queue {choice.root}: {choice.how}" + (
        " (you are in no queue's clone and gave no --queue; cd into your queue's clone or give --queue PATH)"
        if choice.sample else ""))
    try:
        cfg = settings.current()
        d.warnings += list(cfg.warnings)
        d.notes.append(summary(cfg))
    except Problem as e:  # a bad setting is this machine's problem, named like a file's
        d.problems.append(e)
    from workstation.tui.keymap import resolve_keymap

    d.warnings += resolve_keymap(None).problems  # the user keymap's ignored entries (the app lists them too)
    click.echo(d.format())
    if d.problems:
        sys.exit(1)


COMMANDS = (
    verdict_cmd,
    sync_cmd,
    reserve_cmd,
    release_cmd,
    history_cmd,
    dispute_cmd,
    resolve_cmd,
    recheck_cmd,
    calibrate_cmd,
    report_cmd,
    doctor_cmd,
)

