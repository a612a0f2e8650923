"""Longer chaos runs than CI's (prints figures; not a timed test).

Each run: ``--clones`` clones of one bare remote, per clone a loop of ``--verdicts``
``kws verdict`` commands and a loop of ``--syncs`` ``kws sync`` commands at the same time,
each command signalled with probability ``--kill-p`` (SIGKILL 70 %, SIGTERM 20 %, SIGINT
10 %; a third of the verdict kills hit the whole process group, git children included),
then one recovering ``kws sync`` per clone with no manual step (a failure there is a
*wedged* clone), ``git fsck``, leftovers (rebase state, git locks, kws journal, a dirty work
tree), a final sync, and the remote's verdicts against those whose command exited 0
(*lost*: missing, *doubled*: stored twice). See tests/chaoskit.py.

Usage: ``.venv/bin/python benchmarks/chaos.py [--runs 10] [--clones 4] [--verdicts 15]
[--syncs 10] [--kill-p 0.35] [--seed 0]``. Everything runs in temporary folders with their
own HOME, git configuration and KWS_* folders.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chaoskit import run_chaos


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--clones", type=int, default=4)
    ap.add_argument("--verdicts", type=int, default=15)
    ap.add_argument("--syncs", type=int, default=10)
    ap.add_argument("--kill-p", type=float, default=0.35)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    totals = {"commands": 0, "writes": 0, "kills": 0, "lost": 0, "doubled": 0, "wedged": 0, "leftovers": 0, "fsck": 0}
    for run in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="kws-chaos-") as d:
            tmp = Path(d)
            home = tmp / "home"
            home.mkdir()
            (home / ".gitconfig").write_text("")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "KWS_"))}
            env.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                       KWS_STATE_DIR=str(tmp / "state"), KWS_DATA_DIR=str(tmp / "data"))
            os.environ.update({k: env[k] for k in ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")})
            rep = run_chaos(tmp, seed=a.seed + run, clones=a.clones, verdicts=a.verdicts, syncs=a.syncs,
                            kill_p=a.kill_p, base_env=env)
        print(f"run {run} (seed {a.seed + run}): {rep.figures()}", flush=True)
        for m in rep.messages:
            print(f"    {m}", flush=True)
        totals["commands"] += rep.ops
        totals["writes"] += rep.writes
        totals["kills"] += rep.kills
        totals["lost"] += len(rep.lost)
        totals["doubled"] += len(rep.doubled)
        totals["wedged"] += len(rep.wedged)
        totals["leftovers"] += len(rep.leftovers)
        totals["fsck"] += len(rep.fsck)
    print("total: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    return 1 if totals["lost"] or totals["doubled"] or totals["wedged"] or totals["leftovers"] or totals["fsck"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
