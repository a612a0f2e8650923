"""``kws signing``: sign your record commits (git's SSH signing) once per machine
(``setup``), and add a reviewer's key to a queue's allowed signers (``add``)."""

from __future__ import annotations

from pathlib import Path

import click

from workstation.cli.records import _fails_cleanly, _open, _queue_option, _root, _share_record
from workstation.repo.gitqueue import (
    reviewer_identity,
)


@click.group("signing")
def signing_group() -> None:
    """Sign your record commits (git's SSH signing), once per machine."""


@signing_group.command("setup")
@click.option("--key", default=None, metavar="PATH",
              help="Your SSH key (private key, or .pub with an agent). Default: git's user.signingkey, else "
                   "~/.ssh/id_ed25519, id_ecdsa, id_rsa.")
@click.option("--new-key", "new_key", default=None, metavar="PATH", type=click.Path(dir_okay=False, path_type=Path),
              help="Make a new ed25519 key at PATH with ssh-keygen (it asks for a passphrase) and use it.")
@click.option("--apply", "apply", is_flag=True, help="Write the git configuration (default: print it).")
@click.option("--local", "local", is_flag=True, help="With --apply: in this queue's .git/config, not ~/.gitconfig.")
@_queue_option
@_fails_cleanly
def signing_setup_cmd(key: str | None, new_key: Path | None, apply: bool, local: bool, queue: Path | None) -> None:
    """Set up git to sign your record commits with an SSH key, and print the line the
    queue's owners add to its allowed signers file (docs/records.md, "Signed records")."""
    import subprocess

    from workstation.records.signing import setup_plan
    from workstation.repo.gitqueue import run_git

    repo = _open(queue)
    who = reviewer_identity(repo)
    if new_key is not None:
        if new_key.exists():
            raise click.ClickException(f"{new_key} exists already; give it with --key, or another path")
        new_key.parent.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["ssh-keygen", "-t", "ed25519", "-C", who.email, "-f", str(new_key)]).returncode != 0:
            raise click.ClickException("ssh-keygen did not make the key; nothing was configured")
        key = str(new_key)
    plan = setup_plan(repo, who, key)
    if plan.problems:
        raise click.ClickException("; ".join(plan.problems))
    scope = ["--local"] if local else ["--global"]
    where = f"git -C {_root(repo)} config --local" if local else "git config --global"
    for k, val in plan.config:
        if apply:
            run_git(repo, "config", *scope, k, val)
        click.echo(f"{'set' if apply else 'run'}: {where} {k} {val}")
    if not apply:
        click.echo("(or run kws signing setup --apply to set it)")
    from workstation.records.signing import records_policy, signing_key

    policy = records_policy(repo)
    if policy.off:
        now = signing_key(repo) is not None
        click.echo("note: this queue does not check signatures ([records] signatures = \"off\"); kws signs your "
                   "record commits " + ("all the same (with " + str(signing_key(repo)) + ")" if now else
                                        "all the same once this configuration is set")
                   + ", so they count in a queue that checks them")
    if plan.listed:
        click.echo(f"your key is already in this queue's allowed signers ({policy.allowed_signers}) for {who.email}")
    else:
        click.echo(f"ask an owner of this queue to add this line to {policy.allowed_signers} (in a signed commit):")
        click.echo(f"  {plan.line}")


@signing_group.command("add")
@click.argument("lines", nargs=-1, required=True, metavar="LINE...")
@click.option("--no-sync", is_flag=True, help="Commit locally only; do not sync.")
@_queue_option
@_fails_cleanly
def signing_add_cmd(lines: tuple[str, ...], no_sync: bool, queue: Path | None) -> None:
    """Add reviewers' allowed-signers LINEs (what kws signing setup prints them) to the
    queue's allowed signers, in a commit signed by your key, then sync. Only a change
    signed by a key the file already lists counts (docs/records.md, "Signed records")."""
    from workstation.records.team import add_signers

    repo = _open(queue, write=True, record="allowed-signers change")
    who = reviewer_identity(repo)
    commit, added = add_signers(repo, who, list(lines))
    if commit is None:
        click.echo("every line is in the allowed signers already; nothing committed")
        return
    click.echo(f"committed {commit[:12]}: the allowed signers now also list {', '.join(a.split(' ', 1)[0] for a in added)}")
    _share_record(repo, no_sync)


COMMANDS = (signing_group,)
