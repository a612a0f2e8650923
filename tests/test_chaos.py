"""The chaos test: concurrent ``kws verdict`` and ``kws sync`` loops in several clones of
one remote, random signals (mostly ``kill -9``), then recovery with no manual step.

Seeded and bounded for CI (``KWS_CHAOS_SEED``, default 12; about a minute on 2 cores);
``benchmarks/chaos.py`` runs longer schedules and prints the figures.
"""

from __future__ import annotations

import os

from tests.chaoskit import run_chaos
from tests.recordkit import isolate


def test_kills_during_verdict_and_sync_lose_nothing_and_wedge_nothing(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    seed = int(os.environ.get("KWS_CHAOS_SEED", "12"))
    rep = run_chaos(tmp_path, seed=seed, clones=3, verdicts=5, syncs=4, kill_p=0.5)
    print(rep.figures())
    assert rep.kills >= 5 and rep.writes >= 5, rep.figures()  # the schedule really killed and wrote
    # which recoveries a schedule exercises depends on when each signal lands, which the
    # machine's load moves; test_record_faults kills at each recovery point deterministically
    assert rep.wedged == [], rep.messages
    assert rep.leftovers == [] and rep.fsck == [], (rep.leftovers, rep.fsck)
    assert rep.lost == [] and rep.doubled == [], rep.figures()
    assert rep.history_missing == []
    assert not [m for m in rep.messages if "final sync" in m], rep.messages
