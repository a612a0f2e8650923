"""How long a whole battery takes on a candidate that hangs, per kind of hang (issue 40).

For each kind, a copy of a sample task (default ``sample_queue/tasks/softmax-gen``) gets the
hang at the top of its candidate's entry point, nothing else changed, and ``kws check --json``
runs on it (every check, the default seeds and budgets unless ``--step-timeout`` is given);
the script prints the exit code, the finding that names the hang, and the wall time. With
``--hogs N`` it first starts N busy loops, each in a session of its own (``setsid``), and
kills them after each run: the verdicts must stay the same, the time may grow with the load.

Kinds: ``spin`` (``while True: pass``), ``sleep`` (``time.sleep(3600)``), ``read`` (a read of
a pipe no one writes), ``deadlock`` (two threads taking two locks in opposite orders),
``channel`` (the stalled channel: the candidate finds kws's channel to the fork server on
its call stack, sends hand-overs without reading the answers, then points the channel's
descriptors at ``/dev/null``).

Nothing here is asserted: it prints figures (docs/architecture.md, "Isolation", quotes them).

    python benchmarks/hang_bounds.py                     # the five kinds, quiet
    python benchmarks/hang_bounds.py --hogs 0,8          # quiet, then under 8 hogs
    python benchmarks/hang_bounds.py --kinds sleep --step-timeout 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TASK = REPO / "sample_queue" / "tasks" / "softmax-gen"

#: module-level helpers put at the top of the candidate's file, per kind.
HELPERS = {
    "deadlock": '''
import threading as _kws_threading, time as _kws_time
def _kws_hang():
    a, b = _kws_threading.Lock(), _kws_threading.Lock()
    def other():
        with b:
            _kws_time.sleep(0.2)
            with a:
                pass
    t = _kws_threading.Thread(target=other)
    t.start()
    with a:
        _kws_time.sleep(0.2)
        with b:
            pass
    t.join()
''',
    "channel": '''
import os as _kws_os, sys as _kws_sys
def _kws_hang():
    f, ch = _kws_sys._getframe(), None
    while f is not None and ch is None:
        c = f.f_locals.get("channel")
        ch = c if isinstance(c, tuple) and len(c) == 2 else None
        f = f.f_back
    w, r = ch or _kws_sys.modules["workstation.harness"].CHANNEL
    for _ in range(100000):
        _kws_os.write(w, b"V " + b"0" * 64 + b" -\\n")
    null = _kws_os.open(_kws_os.devnull, _kws_os.O_RDWR)
    _kws_os.dup2(null, w)
    _kws_os.dup2(null, r)
''',
}
#: the statement put at the top of the entry point, per kind.
HANGS = {
    "spin": "while True:\n        pass",
    "sleep": "__import__('time').sleep(3600)",
    "read": "__import__('os').read(__import__('os').pipe()[0], 1)",
    "deadlock": "_kws_hang()",
    "channel": "_kws_hang()",
}


def hung_copy(task: Path, kind: str, root: Path) -> Path:
    """A copy of ``task`` under ``root`` whose candidate entry point starts with the hang.

    Raises:
        ValueError: the entry point's ``def`` line is not found in its file.
    """
    dst = root / kind / task.name  # the folder is named as the task id
    shutil.copytree(task, dst)
    toml = (dst / "task.toml").read_text()
    m = re.search(r'^candidate\s*=\s*"([^":]+):([A-Za-z_]\w*)"', toml, re.M)
    if m is None:
        raise ValueError(f"{task}/task.toml has no [entry] candidate")
    path, func = dst / m.group(1), m.group(2)
    src = path.read_text()
    d = re.search(rf"^def {func}\(.*?\).*?:\s*$", src, re.M | re.S)
    if d is None:
        raise ValueError(f"def {func} not found in {path}")
    src = src[:d.end()] + f"\n    {HANGS[kind]}" + src[d.end():]
    path.write_text(_after_future(src, HELPERS.get(kind, "")))
    return dst


def _after_future(src: str, helper: str) -> str:
    """``helper`` put after the module's ``from __future__`` imports (they must come first)."""
    lines = src.splitlines(keepends=True)
    last = max((i for i, ln in enumerate(lines) if ln.startswith("from __future__")), default=-1)
    return "".join(lines[:last + 1]) + helper + "".join(lines[last + 1:])


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` busy loops, each in a session of its own."""
    return [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], start_new_session=True)
            for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for h in hogs:
        try:
            os.killpg(h.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        h.wait()


#: how the report names a hang, and a call refused after it.
NAMES = ("was blocked for", "did not finish within", "was ended by kws", "cannot be trusted")


def named_hang(doc: dict) -> str:
    """The summary of the first fail finding that names the hang itself (not a call kws
    refused after it), else of the first fail, cut short."""
    fails = [str(f.get("summary", "")) for f in doc.get("findings", []) if f.get("severity") == "fail"]
    named = [s for s in fails if any(n in s for n in NAMES)]
    return ((named or fails or ["(no fail finding)"])[0])[:170]


def run_one(task: Path, env: dict[str, str], limit: float) -> tuple[int | None, float, str]:
    """(exit code or None when cut at ``limit``, wall seconds, the named hang) of one
    ``kws check --json`` on ``task``."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "workstation.cli.main", "check", str(task), "--json"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, f"(still running after {limit:g} s: cut)"
    wall = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return p.returncode, wall, f"(no report: {p.stderr.strip()[-200:]})"
    return p.returncode, wall, named_hang(doc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    ap.add_argument("--kinds", default=",".join(HANGS), help=f"comma-separated, of {', '.join(HANGS)}")
    ap.add_argument("--hogs", default="0", help="comma-separated hog counts, e.g. 0,8")
    ap.add_argument("--step-timeout", type=float, default=None, help="KWS_STEP_TIMEOUT for the runs (default: kws's)")
    ap.add_argument("--limit", type=float, default=3600.0, help="wall seconds after which a run is cut")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.step_timeout is not None:
        env["KWS_STEP_TIMEOUT"] = str(args.step_timeout)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in HANGS]
    if unknown:
        ap.error(f"unknown kind(s): {', '.join(unknown)}")
    root = Path(tempfile.mkdtemp(prefix="kws-hang-bounds-"))
    print(f"task {args.task.name}, {os.cpu_count()} CPUs, KWS_STEP_TIMEOUT={env.get('KWS_STEP_TIMEOUT', 'default')}")
    print(f"{'kind':<9} {'hogs':>4} {'exit':>4} {'wall s':>7} {'load':>5}  named")
    try:
        for n in [int(x) for x in args.hogs.split(",")]:
            for kind in kinds:
                task = hung_copy(args.task, kind, root / f"h{n}")
                hogs = start_hogs(n)
                try:
                    time.sleep(1.0 if n else 0.0)
                    code, wall, named = run_one(task, env, args.limit)
                    load = os.getloadavg()[0]
                finally:
                    stop_hogs(hogs)
                print(f"{kind:<9} {n:>4} {code if code is not None else '-':>4} {wall:>7.0f} {load:>5.1f}  {named}",
                      flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
