"""``kws selfcheck``: run the battery on the corpus of published hacks and say how much of it
the battery catches ("battery catches N/M, clean twins quiet K/M").

The corpus (default: the bundled ``sample_queue_hacks/``; ``--queue`` another) holds one
task per published mechanism and a clean twin of each, with ``hack.toml`` sidecars naming
the checks that must fail (:mod:`workstation.engine.selfcheck`). Each task runs with the
checks its sidecar names plus ``correctness`` (``--full``: the whole battery).

Exit codes (fail-closed, as ``kws check``): 0 every hack caught and every clean twin quiet,
all judged; 1 a hack missed or a twin noisy; 2 the corpus or an option is bad; 3 kws's
runner failed; 4 nothing missed but a row was not judged or not covered (a check id kws
does not have yet). GPU-only rows on a CPU are listed and left out of the figures.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click


@click.command("selfcheck")
@click.option("--queue", "queue", type=click.Path(path_type=Path), default=None,
              help="Corpus queue (tasks/<id>/hack.toml). Default: the bundled sample_queue_hacks.")
@click.option("--subset", default=None,
              help="'cheap' (a few fast pairs) or comma-separated hack ids (each with its twin).")
@click.option("--full", is_flag=True, help="Run the whole battery on every task (a twin must fail no check).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (only JSON on stdout).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Force a device (default: CUDA when present, else CPU with the Triton interpreter).")
@click.option("--no-store", "no_store", is_flag=True, help="Do not store the figure for the help screen.")
def selfcheck_cmd(queue: Path | None, subset: str | None, full: bool, as_json: bool, device: str | None,
                  no_store: bool) -> None:
    """Run the published-hack corpus; print a row per task and the battery's catch rate.

    Exit 0 only when every hack is caught and every clean twin quiet; 1 a miss or a noisy
    twin; 2 bad corpus/option; 3 kws failed; 4 a row not judged or not yet covered."""
    from workstation.engine.selfcheck import bundled_corpus, load_corpus, run_corpus, select
    from workstation.runner import RunnerError
    from workstation.schema.problem import Problem

    try:
        root = queue if queue is not None else bundled_corpus()
        entries = select(load_corpus(root), subset)
    except Problem as e:
        click.echo(f"kws: {e}", err=True)
        sys.exit(2)
    except KeyError as e:
        click.echo(f"kws: --subset: {e.args[0] if e.args else e}", err=True)
        sys.exit(2)

    def on_row(row) -> None:  # a selfcheck Row
        if not as_json:
            click.echo(_row_text(row))

    if not as_json:
        click.echo(f"{'task':<30} {'source':<34} {'checks':<28} outcome")
    try:
        res = run_corpus(entries, full=full, device=device, on_row=on_row)
    except RunnerError as e:
        click.echo(f"kws: the isolated runner failed: {e}", err=True)
        sys.exit(3)
    doc = res.as_dict()
    doc["queue"] = str(root)
    doc["subset"] = subset or ""
    if not no_store:
        from workstation.review.selfcheck_figure import store_figure

        fig = {k: doc[k] for k in ("summary", "caught", "hacks", "quiet", "twins", "device", "full", "subset",
                                   "queue", "seconds", "exit_code")}
        fig["when"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        try:
            store_figure(fig)
        except OSError as e:
            click.echo(f"kws: warning: the figure was not stored: {e}", err=True)
    if as_json:
        click.echo(json.dumps(doc))
    else:
        others = {k: v for k, v in doc["outcomes"].items() if k not in ("caught", "quiet")}
        tail = f" ({', '.join(f'{v} {k}' for k, v in sorted(others.items()))})" if others else ""
        click.echo(f"{res.summary()}{tail}; {res.seconds:.0f} s on {res.device}")
    sys.exit(res.exit_code)


def _row_text(row) -> str:
    e = row.entry
    mark = {"caught": "caught", "quiet": "quiet", "missed": "MISSED", "noisy": "NOISY"}.get(row.outcome, row.outcome)
    checks = ",".join(e.watched) or "-"
    line = f"{e.id:<30} {e.source[:34]:<34} {checks[:28]:<28} {mark}"
    if row.outcome not in ("caught", "quiet") and row.detail:
        line += f"  ({row.detail[:200]})"
    return line


COMMANDS = (selfcheck_cmd,)
