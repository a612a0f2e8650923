"""The chaos harness: several clones of one bare remote, concurrent ``kws verdict`` and
``kws sync`` loops in each (real ``kws`` processes), random signals (mostly ``kill -9``),
then recovery with no manual step and a check that nothing was lost or doubled.

Half of the kills land at a random time in the command's life (mostly Python start-up and
the network); the other half at the command's n-th git command (n random), just before it
runs or just after it finished, by a ``git`` wrapper first on kws's PATH that signals its
parent: so the windows inside kws's git work (between a commit's compare-and-swap and its
index update, while git holds a lock, mid-fetch, mid-push) are hit too. Used by ``tests/test_chaos.py`` (seeded, bounded for CI) and ``benchmarks/chaos.py``
(longer runs, figures printed). Every random choice comes from ``random.Random(seed)``
per loop, so a seed names the schedule (process timing still varies with machine load).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_FIELDS = ("reference=legitimate", "tolerance=appropriate", "correctness=correct", "edge_coverage=covered",
           "benchmark=not-applicable", "failure_report=not-applicable")
_SIGNALS = ((signal.SIGKILL, 0.7), (signal.SIGTERM, 0.2), (signal.SIGINT, 0.1))


@dataclass
class ChaosReport:
    """What one chaos run did and found.

    ``writes``: ``kws verdict`` commands that exited 0 (their ids in ``committed``);
    ``kills``: processes signalled while running; ``lost``: committed verdicts missing from
    the remote after recovery; ``doubled``: verdict ids stored more than once there;
    ``wedged``: clones whose first sync after the run failed (their messages in
    ``messages``); ``leftovers``: rebase states, git locks or journals found after recovery;
    ``fsck``: clones where ``git fsck`` was not clean; ``recoveries``: what kws's recovery
    repaired (from each clone's ``.git/kws/recovery.log``), by kind.
    """

    clones: int
    ops: int = 0
    writes: int = 0
    kills: int = 0
    signals: dict[str, int] = field(default_factory=dict)
    committed: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    wedged: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    fsck: list[str] = field(default_factory=list)
    history_missing: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    recoveries: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def figures(self) -> str:
        sig = ", ".join(f"{k} {v}" for k, v in sorted(self.signals.items()))
        return (f"clones {self.clones}, commands {self.ops}, writes {self.writes}, kills {self.kills} ({sig}), "
                f"lost {len(self.lost)}, doubled {len(self.doubled)}, wedged {len(self.wedged)}, "
                f"leftovers {len(self.leftovers)}, fsck errors {len(self.fsck)}, {self.seconds:.0f} s; recoveries: "
                + (", ".join(f"{k} {v}" for k, v in sorted(self.recoveries.items())) or "none"))


def _git(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


def _kws(clone: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workstation.cli.main", *args, "--queue", str(clone)]


def _env(base: dict[str, str], i: int) -> dict[str, str]:
    env = dict(base)
    env.update({"PYTHONPATH": str(REPO_ROOT), "GIT_AUTHOR_NAME": f"Reviewer {i}",
                "GIT_AUTHOR_EMAIL": f"r{i}@example.com", "GIT_COMMITTER_NAME": f"Reviewer {i}",
                "GIT_COMMITTER_EMAIL": f"r{i}@example.com", "KWS_STATE_DIR": str(Path(base["KWS_STATE_DIR"]) / str(i))})
    return env


def setup(tmp: Path, clones: int, env: dict[str, str]) -> tuple[Path, list[Path]]:
    """A bare remote seeded with a two-task queue, and ``clones`` clones of it."""
    from tests.recordkit import make_queue

    seed = make_queue(tmp / "seed", ("alpha", "beta"))
    bare = tmp / "remote.git"
    _git("init", "-q", "--bare", "-b", "main", str(bare), env=env)
    seed.git.push("-q", str(bare), "main:main")
    paths = []
    for i in range(clones):
        p = tmp / f"clone{i}"
        r = _git("clone", "-q", str(bare), str(p), env=env)
        assert r.returncode == 0, r.stderr
        paths.append(p)
    return bare, paths


_WRAPPER = """#!/bin/bash
# chaoskit: count this kws process's git commands; at the chosen one, signal kws
# (before the git command runs, or right after it finished) -- then carry on as git.
n=$(( $(cat "$KWS_CHAOS_COUNTER" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$KWS_CHAOS_COUNTER"
if [ -n "$KWS_CHAOS_KILL_AT" ] && [ "$n" = "$KWS_CHAOS_KILL_AT" ]; then
  target=$PPID
  [ "$KWS_CHAOS_GROUP" = 1 ] && target="-$PPID"
  if [ "$KWS_CHAOS_WHEN" = before ]; then
    echo "$n" > "$KWS_CHAOS_COUNTER.killed"
    kill -s "$KWS_CHAOS_SIG" -- "$target"
    exec "{real}" "$@"
  fi
  "{real}" "$@"
  rc=$?
  echo "$n" > "$KWS_CHAOS_COUNTER.killed"
  kill -s "$KWS_CHAOS_SIG" -- "$target"
  exit $rc
fi
exec "{real}" "$@"
"""


def _wrapper_dir(tmp: Path) -> Path:
    """A folder with a ``git`` wrapper (:data:`_WRAPPER`) to put first on kws's PATH."""
    import shutil

    d = tmp / "chaos-bin"
    d.mkdir(exist_ok=True)
    w = d / "git"
    w.write_text(_WRAPPER.replace("{real}", shutil.which("git") or "/usr/bin/git"))
    w.chmod(0o755)
    return d


def _loop(kind: str, clone: Path, i: int, n: int, rng: random.Random, kill_p: float, env: dict[str, str],
          report: ChaosReport, lock: threading.Lock) -> None:
    for k in range(n):
        if kind == "verdict":
            task = ("alpha", "beta")[rng.randrange(2)]
            args = ["verdict", task, "--overall", "accept", *[a for f in _FIELDS for a in ("--field", f)]]
        else:
            args = ["sync"]
        kill = rng.random() < kill_p
        delay = rng.uniform(0.05, 1.5)
        at_git = rng.random() < 0.5  # aimed at kws's git work: at its nth git command
        nth = rng.randrange(16, 26) if kind == "verdict" else rng.randrange(1, 30)  # a commit: git commands ~10-25
        when = ("before", "after")[rng.randrange(2)]
        r = rng.random()
        sig = next(s for s, w in _SIGNALS if (r := r - w) < 0) if kill else None
        group = kill and kind == "verdict" and rng.random() < 0.3  # the git children too
        penv = dict(env)
        counter = Path(env["KWS_CHAOS_DIR"]) / f"count-{i}-{kind}-{k}"
        penv["KWS_CHAOS_COUNTER"] = str(counter)
        if kill and at_git:
            penv.update(KWS_CHAOS_KILL_AT=str(nth), KWS_CHAOS_WHEN=when, KWS_CHAOS_SIG=str(int(sig)),
                        KWS_CHAOS_GROUP="1" if group else "0")
        p = subprocess.Popen(_kws(clone, *args), cwd=REPO_ROOT, env=penv, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        killed = False
        if kill:
            if at_git:
                p.wait(timeout=300)
                killed = Path(f"{counter}.killed").exists()
                running = False
            else:
                try:
                    p.wait(timeout=delay)
                    running = False
                except subprocess.TimeoutExpired:
                    running = True
            if running:
                try:
                    (os.killpg if group else os.kill)(p.pid, sig)
                    killed = True
                except ProcessLookupError:
                    pass
        try:  # a signalled kws exits at once; one still running a minute later is wedged
            out, err = p.communicate(timeout=60 if killed else 300)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            with lock:
                report.wedged.append(f"clone{i} {kind} #{k}: still running 60 s after {signal.Signals(sig).name}")
        with lock:
            report.ops += 1
            if killed:
                report.kills += 1
                name = signal.Signals(sig).name + (" (group)" if group else "")
                report.signals[name] = report.signals.get(name, 0) + 1
            if kind == "verdict" and p.returncode == 0:
                vid = next((ln.split()[2] for ln in out.splitlines() if ln.startswith("committed verdict ")), None)
                assert vid is not None, out
                report.writes += 1
                report.committed.add(vid)
            elif p.returncode not in (0, -9, -15, -2, 130, 1) and not killed:
                report.messages.append(f"clone{i} {kind} #{k}: exit {p.returncode}: {err.strip()[-500:]}")
            elif p.returncode == 1 and not killed and kind == "verdict":
                report.messages.append(f"clone{i} verdict #{k} refused: {err.strip()[-500:]}")
        time.sleep(rng.uniform(0.0, 0.2))


def run_chaos(tmp: Path, *, seed: int = 0, clones: int = 3, verdicts: int = 8, syncs: int = 6,
              kill_p: float = 0.35, base_env: dict[str, str] | None = None) -> ChaosReport:
    """One chaos run in ``tmp`` (see the module docstring): per clone, a loop of
    ``verdicts`` ``kws verdict`` commands and a loop of ``syncs`` ``kws sync`` commands at
    the same time, each command signalled with probability ``kill_p`` after 0.05-1.5 s;
    then, with no manual step, one ``kws sync`` per clone (must succeed: else the clone is
    counted as wedged), the leftovers and ``git fsck`` checked, a final sync per clone,
    and the remote's verdicts compared with the committed ones."""
    t0 = time.monotonic()
    env = dict(base_env or os.environ)
    env["PATH"] = f"{_wrapper_dir(tmp)}{os.pathsep}{env.get('PATH', '')}"
    env["KWS_CHAOS_DIR"] = str(tmp / "chaos-bin")
    env.setdefault("KWS_STATE_DIR", str(tmp / "state"))
    env.setdefault("KWS_DATA_DIR", str(tmp / "data"))
    bare, paths = setup(tmp, clones, env)
    report = ChaosReport(clones=clones)
    lock = threading.Lock()
    threads = []
    for i, clone in enumerate(paths):
        cenv = _env(env, i)
        for kind, n in (("verdict", verdicts), ("sync", syncs)):
            rng = random.Random(f"{seed}-{i}-{kind}")
            threads.append(threading.Thread(target=_loop, args=(kind, clone, i, n, rng, kill_p, cenv, report, lock)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.5)  # orphaned git children of killed processes finish
    for i, clone in enumerate(paths):
        r = subprocess.run(_kws(clone, "sync"), cwd=REPO_ROOT, env=_env(env, i), capture_output=True, text=True)
        if r.returncode != 0:
            report.wedged.append(f"clone{i}")
            report.messages.append(f"clone{i} first sync after the run: {r.stdout}{r.stderr}".strip()[-800:])
    for i, clone in enumerate(paths):
        gd = clone / ".git"
        for name in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "kws/journal.json"):
            if (gd / name).exists():
                report.leftovers.append(f"clone{i}: {name}")
        for lockfile in [*gd.glob("*.lock"), *(gd / "refs").rglob("*.lock")]:
            report.leftovers.append(f"clone{i}: {lockfile.relative_to(gd)}")
        fsck = _git("fsck", "--no-dangling", "--no-progress", cwd=clone, env=env)
        if fsck.returncode != 0 or "error" in fsck.stderr.lower() or "missing" in fsck.stdout:
            report.fsck.append(f"clone{i}: {fsck.stdout}{fsck.stderr}".strip()[-500:])
        status = _git("status", "--porcelain", cwd=clone, env=env).stdout.strip()
        if status:
            report.leftovers.append(f"clone{i}: work tree not clean: {status[:300]}")
    for i, clone in enumerate(paths):  # a final sync: every clone now has everything
        r = subprocess.run(_kws(clone, "sync"), cwd=REPO_ROOT, env=_env(env, i), capture_output=True, text=True)
        if r.returncode != 0:
            report.messages.append(f"clone{i} final sync: {r.stderr.strip()[-500:]}")
    fsck = _git("fsck", "--no-dangling", "--no-progress", env=env, cwd=bare)
    if fsck.returncode != 0:
        report.fsck.append(f"remote: {fsck.stderr.strip()[-500:]}")
    check = tmp / "check"
    _git("clone", "-q", str(bare), str(check), env=env)
    ids: dict[str, int] = {}
    for line in _git("grep", "-h", "^verdict_id = ", "HEAD", "--", "verdicts", cwd=check, env=env).stdout.splitlines():
        vid = line.split("=", 1)[1].strip().strip('"')
        vid = vid.split(":", 1)[-1].strip().strip('"')
        ids[vid] = ids.get(vid, 0) + 1
    report.lost = sorted(report.committed - set(ids))
    report.doubled = sorted(v for v, n in ids.items() if n > 1)
    history = ""
    for task in ("alpha", "beta"):
        r = subprocess.run(_kws(paths[0], "history", task), cwd=REPO_ROOT, env=_env(env, 0), capture_output=True,
                           text=True)
        history += r.stdout
    report.history_missing = sorted(v for v in report.committed if v[:8] not in history)
    kinds = (("stale git lock", "stale lock removed"), ("finished an interrupted", "interrupted update finished"),
             ("had not moved", "interrupted before the ref moved"), ("dropped the journal", "journal dropped"),
             ("temporary work tree", "temporary work tree removed"), ("aborted a rebase", "legacy rebase aborted"))
    for clone in paths:
        log = clone / ".git" / "kws" / "recovery.log"
        for line in (log.read_text().splitlines() if log.is_file() else []):
            name = next((n for k, n in kinds if k in line), "other")
            report.recoveries[name] = report.recoveries.get(name, 0) + 1
    report.seconds = time.monotonic() - t0
    return report


if __name__ == "__main__":  # pragma: no cover - python -m tests.chaoskit DIR [seed]
    import tempfile

    d = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    rep = run_chaos(d, seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(rep.figures())
    print(json.dumps(rep.messages, indent=1))
