"""``kws cache``: what kws's content-addressed cache holds (proofs, kept step results), and
``kws cache clear`` to empty it (:mod:`workstation.engine.kwscache`)."""

from __future__ import annotations

import click


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


@click.group("cache", invoke_without_command=True)
@click.pass_context
def cache_group(ctx: click.Context) -> None:
    """Show what kws's cache holds: bounds-proof's proofs and the step results kws keeps
    (Triton AOT analysis, bounds records), per kind, with the folder and the size cap."""
    if ctx.invoked_subcommand is not None:
        return
    from workstation import settings
    from workstation.engine import kwscache

    use = kwscache.usage()
    click.echo(f"kws cache: {kwscache.root()} (cap {_mib(settings.current().cache_bytes)}, the cache_bytes setting)")
    for ns, (files, size) in use.items():
        click.echo(f"  {ns:<8} {files:6d} entries  {_mib(size)}")


@cache_group.command("clear")
def cache_clear_cmd() -> None:
    """Remove every entry of kws's cache (the next runs prove and compile again)."""
    from workstation.engine import kwscache

    files, size = kwscache.clear()
    click.echo(f"kws cache: removed {files} entries ({_mib(size)}) from {kwscache.root()}")


COMMANDS = (cache_group,)
