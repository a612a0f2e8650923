"""The ``kws`` command.

``kws`` with no sub-command opens the review app on a queue (``--queue PATH``, default: the
queue whose clone holds the current folder, else the ``queue`` setting, else the per-user
copy of the bundled sample queue, made on first run); a ``--queue`` given here also reaches
the sub-commands (``kws --queue PATH doctor``). The sub-commands live
in one module per command group: :mod:`workstation.cli.check` (check, queue),
:mod:`workstation.cli.config` (config), :mod:`workstation.cli.profile` (profile), :mod:`workstation.cli.records` (verdict,
dispute, history, sync, ...) and :mod:`workstation.cli.screen` (screen).
"""

from __future__ import annotations

from pathlib import Path

import click

from workstation import __version__


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None,
              help="Queue to open or work on (a git repository with tasks/). Default: the clone you are in, "
                   "else the queue setting, else the per-user sample queue.")
@click.option("--keymap", default=None, help="Keymap name (default, vim) or a keymap file.")
@click.version_option(__version__, prog_name="kws")
@click.pass_context
def main(ctx: click.Context, queue: Path | None, keymap: str | None) -> None:
    """kws, the kernel review workstation."""
    _check_settings(ctx.invoked_subcommand)
    if ctx.invoked_subcommand is not None:
        return
    from workstation.tui.app import run_app

    run_app(queue=queue, keymap=keymap)


#: sub-commands that show the settings' problems and warnings themselves.
_SHOWS_SETTINGS = ("config", "doctor")
#: sub-commands that report a bad setting in their own format (``kws check --json``: the
#: contract's ``{"error": ...}``, exit 2).
_REPORTS_PROBLEMS = (*_SHOWS_SETTINGS, "check")


def _check_settings(command: str | None) -> None:
    """Stop with the problem (exit 2) when a setting holds a bad value, unless ``command``
    reports it itself; print the config file's unknown keys as warnings on stderr."""
    from workstation import settings
    from workstation.schema.problem import Problem

    try:
        cfg = settings.current()
    except Problem as e:
        if command in _REPORTS_PROBLEMS:
            return
        click.echo(f"kws: {e}", err=True)
        raise SystemExit(2) from None
    if command not in _SHOWS_SETTINGS:
        for w in cfg.warnings:
            click.echo(f"kws: warning: {w}", err=True)


from workstation.cli import cache, check, config, profile, records, screen, selfcheck, signing  # noqa: E402  (command modules; they never import this one)

for _cmd in (*cache.COMMANDS, *check.COMMANDS, *config.COMMANDS, *profile.COMMANDS, *records.COMMANDS, *signing.COMMANDS, *screen.COMMANDS,
             *selfcheck.COMMANDS):
    main.add_command(_cmd)

if __name__ == "__main__":
    main()
