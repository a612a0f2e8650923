"""``kws config``: every setting (:mod:`workstation.settings`, docs/settings.md) with its
effective value, unit, source and meaning.

Exit codes: 0, or 2 when a setting holds a bad value (the environment variable, or the
config file and its key, with the problem). ``--json`` prints one JSON document (the
problem as ``{"error": {"file", "key", "problem"}}``); ``--markdown`` prints the table of
the declarations that docs/settings.md carries.
"""

from __future__ import annotations

import json
import sys
import textwrap

import click


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON (only JSON on stdout).")
@click.option("--markdown", is_flag=True,
              help="Print the Markdown table of the settings' declarations (docs/settings.md carries it).")
def config_cmd(as_json: bool, markdown: bool) -> None:
    """Every setting: its effective value, unit, source (default, config file, environment)
    and meaning. Exits 2 when one holds a bad value."""
    from workstation import settings
    from workstation.schema.problem import Problem
    from workstation.settings.show import markdown_table, rows

    if markdown:
        click.echo(markdown_table(), nl=False)
        return
    try:
        cfg = settings.reload()
    except Problem as e:
        if as_json:
            click.echo(json.dumps({"error": e.as_dict()}, indent=2))
        else:
            click.echo(f"kws config: {e}", err=True)
        sys.exit(2)
    table = rows(cfg)
    if as_json:
        click.echo(json.dumps({"config_file": str(cfg.config_file), "config_file_exists": cfg.config_file.is_file(),
                               "settings": table, "warnings": [w.as_dict() for w in cfg.warnings]}, indent=2))
        return
    present = "" if cfg.config_file.is_file() else " (not present)"
    click.echo(f"config file: {cfg.config_file}{present}")
    width = max(len(r["name"]) for r in table)
    for r in table:
        unit = f" {r['unit']}" if r["unit"] and not r["text"].startswith("auto:") else ""
        key = f"; config key {r['key']}" if r["key"] else "; environment only"
        click.echo(f"{r['name']:<{width}}  {r['text']}{unit}   ({r['source']})")
        for line in textwrap.wrap(f"{r['meaning']} [{r['env']}{key}]", 88 - width - 2):
            click.echo(f"{'':<{width}}  {line}")
    for w in cfg.warnings:
        click.echo(f"warning: {w}")


COMMANDS = (config_cmd,)
