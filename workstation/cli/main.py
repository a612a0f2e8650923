"""The ``kws`` command.

``kws`` with no sub-command opens the review app on a queue (``--queue PATH``, default:
the per-user copy of the bundled sample queue, made on first run). The sub-commands live
in one module per command group: :mod:`workstation.cli.check` (check, queue),
:mod:`workstation.cli.profile` (profile), :mod:`workstation.cli.records` (verdict,
dispute, history, sync, ...) and :mod:`workstation.cli.screen` (screen).
"""

from __future__ import annotations

from pathlib import Path

import click

from workstation import __version__


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None,
              help="Queue to open (a git repository with tasks/). Default: the per-user sample queue.")
@click.option("--keymap", default=None, help="Keymap name (default, vim) or a keymap file.")
@click.version_option(__version__, prog_name="kws")
@click.pass_context
def main(ctx: click.Context, queue: Path | None, keymap: str | None) -> None:
    """kws, the kernel review workstation."""
    if ctx.invoked_subcommand is not None:
        return
    from workstation.tui.app import run_app

    run_app(queue=queue, keymap=keymap)


from workstation.cli import check, profile, records, screen  # noqa: E402  (command modules; they never import this one)

for _cmd in (*check.COMMANDS, *profile.COMMANDS, *records.COMMANDS, *screen.COMMANDS):
    main.add_command(_cmd)

if __name__ == "__main__":
    main()
