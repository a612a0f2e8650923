"""A hung or hostile candidate is a named fail within its budgets, quiet or under load, and
no job of a run sees what another wrote (issue 40).

Each kind of hang sits in the candidate's entry point of a tiny task: a spin (over twice its
CPU budget), a sleep, a read of a pipe no one writes, a deadlock of two threads on two locks
(each blocked past its wait budget), and a stalled channel (hand-overs sent on kws's channel
without reading the answers, then the channel pointed at ``/dev/null``) or a closed one (the
job ended by the fork server). The same five run again under eight busy loops, each in a
session of its own: the same verdicts. The wall times are benchmarks/hang_bounds.py's to
print; nothing here asserts one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.hostile import make_task
from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.protocol.steps import CallStep
from workstation.runner import bwrap as bw
from workstation.task.format import load_task

pytestmark = pytest.mark.skipif(not bw.find_bwrap() or bool(bw.probe(bw.find_bwrap() or "bwrap")),
                                reason="bubblewrap is not installed or cannot create namespaces here "
                                       "(.ci/run installs it)")

STALL = '''
import os, sys
def _channel():
    f = sys._getframe()
    while f is not None:
        ch = f.f_locals.get("channel")
        if isinstance(ch, tuple) and len(ch) == 2:
            return ch
        f = f.f_back
    return sys.modules["workstation.harness"].CHANNEL
def add(x, y):
    w, r = _channel()
    for _ in range({count}):
        os.write(w, b"V " + b"0" * 64 + b" -\\n")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, w)
    os.dup2(null, r)
    {tail}
    return x + y
'''

DEADLOCK = '''
import threading, time
def add(x, y):
    a, b = threading.Lock(), threading.Lock()
    def other():
        with b:
            time.sleep(0.2)
            with a:
                pass
    t = threading.Thread(target=other)
    t.start()
    with a:
        time.sleep(0.2)
        with b:
            pass
    t.join()
    return x + y
'''

#: kind -> (candidate source, what the fail's summary says).
KINDS: dict[str, tuple[str, str]] = {
    "spin": ("def add(x, y):\n    while True:\n        pass\n", r"did not finish within 4 CPU s \(2 x its 2 CPU s"),
    "sleep": ("import time\ndef add(x, y):\n    time.sleep(3600)\n    return x + y\n",
              r"was blocked for \d+ s .* over its wait budget of 2 s"),
    "read": ("import os\ndef add(x, y):\n    r, w = os.pipe()\n    os.read(r, 1)\n    return x + y\n",
             r"was blocked for \d+ s .* over its wait budget of 2 s"),
    "deadlock": (DEADLOCK, r"was blocked for \d+ s .* over its wait budget of 2 s"),
    "stalled channel": (STALL.format(count=100_000, tail=""), r"refused: .*hand(ed)?[- ]over"),
    "closed channel": (STALL.format(count=0, tail="while True:\n        pass"),
                       r"refused: the job closed its channel to kws's fork server while it ran"),
}
CHECKS = ["correctness", "nondeterminism"]


def _verdict(tmp_path: Any, runner: Any, kind: str) -> tuple[int, dict[str, str], str]:
    """(exit code, check -> status, every fail summary) of the checks on the kind's task."""
    src, _ = KINDS[kind]
    d = make_task(tmp_path, re.sub(r"\W", "-", kind), src)
    res = run_checks(load_task(d), runner, only=CHECKS, seeds=[0])
    text = "\n".join(f.summary for f in res.findings if f.severity == "fail")
    return exit_code(to_json_dict(res)), {r.check: r.status for r in res.results}, text


def _assert_named(kind: str, code: int, statuses: dict[str, str], text: str) -> None:
    assert code == 1, (kind, code, statuses, text)
    assert statuses == dict.fromkeys(CHECKS, "fail"), (kind, statuses, text)
    assert re.search(KINDS[kind][1], text), (kind, text)


@pytest.fixture
def small_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 CPU s step budget (a spin hangs at 4 CPU s) and a 2 s wait budget."""
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "2")


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_hang_is_a_named_fail(kind, tmp_path, runner, small_budgets):
    _assert_named(kind, *_verdict(tmp_path, runner, kind))


@pytest.fixture
def hogs() -> Iterator[list[int]]:
    """Eight busy loops, each in a session of its own (``setsid``), killed afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], start_new_session=True)
             for _ in range(8)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def test_the_same_verdicts_under_eight_hogs(tmp_path, runner, small_budgets, hogs):
    for kind in KINDS:
        _assert_named(kind, *_verdict(tmp_path / "h", runner, kind))


# --------------------------------------------------------------------------- no exchange between jobs

#: job A: a marker in a new file in every folder it can write, appended to every file it can
#: write, in the user keyring and in a SysV shared-memory segment; prints where it wrote.
WRITER = r'''
import ctypes, json, os
MARK = "{mark}"
SKIP = ("/proc", "/sys")
def _places():
    dirs, files = [], []
    for root, subdirs, names in os.walk("/", topdown=True):
        subdirs[:] = [s for s in subdirs if os.path.join(root, s) not in SKIP]
        try:
            with open(os.path.join(root, "kws-xjob-" + MARK), "w") as f:
                f.write(MARK)
            dirs.append(root)
        except OSError:
            pass
        for n in names:
            p = os.path.join(root, n)
            if n.startswith("kws-xjob-") or os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                with open(p, "a") as f:
                    f.write(MARK)
                files.append(p)
            except OSError:
                pass
    return dirs, files
def add(x, y):
    dirs, files = _places()
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(248, b"user", MARK.encode(), MARK.encode(), len(MARK), ctypes.c_int(-4))
    shm = libc.shmget(0x6b7773, 4096, 0o1666)  # IPC_CREAT | 0666
    print("WROTE " + json.dumps({{"dirs": dirs, "files": files, "key": key, "shm": shm}}), flush=True)
    return x + y
'''

#: job B: where A's marker shows (a file name anywhere, the content of a file A appended to,
#: the keyring, the segment); prints what it found.
READER = r'''
import ctypes, json, os
MARK = "{head}" + "{tail}"  # in two halves: this job's own source must not hold it
APPENDED = {appended!r}
SKIP = ("/proc", "/sys")
def add(x, y):
    found = []
    for root, subdirs, names in os.walk("/", topdown=True):
        subdirs[:] = [s for s in subdirs if os.path.join(root, s) not in SKIP]
        found += [os.path.join(root, n) for n in names + subdirs if MARK in n]
    for p in APPENDED:
        try:
            with open(p, "rb") as f:
                if MARK.encode() in f.read():
                    found.append("content of " + p)
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(250, 10, ctypes.c_int(-4), b"user", MARK.encode(), 0) != -1:  # KEYCTL_SEARCH
        found.append("user keyring")
    if libc.shmget(0x6b7773, 0, 0) != -1:
        found.append("SysV shared memory")
    print("FOUND " + json.dumps(found), flush=True)
    return x + y
'''


def _line(job: Any, tag: str) -> Any:
    for line in job.stdout_tail.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise AssertionError(f"no {tag} line: {job.stdout_tail[-2000:]} {job.stderr_tail[-2000:]}")


def _job(runner: Any, task_dir: Any, role: str) -> Any:
    task = load_task(task_dir)
    step = CallStep(role=role, case={"N": 64, "dtype": "float32"}, seed=0)  # type: ignore[arg-type]
    job = runner.run(task.dir, [step], timeout=600, entry={k: str(v) for k, v in task.entry.items()},
                     principal=role, cache_key="xjob-run")
    assert job.status == "ok", (job.status, job.describe_death(), job.stderr_tail[-2000:])
    return job


@pytest.mark.parametrize("reader", ["reference", "candidate"])
def test_two_jobs_of_a_run_exchange_nothing_through_any_writable_path(tmp_path, runner, reader):
    """Job A (the candidate) writes a marker everywhere it can; job B (the reference, or the
    candidate again) looks for it. A reference job finds nothing; a later candidate job finds
    it only in the candidate's compiler cache (``/kws/cache``: shared by one principal's jobs
    of a run by design, never across principals; docs/architecture.md, "Isolation")."""
    mark = uuid.uuid4().hex
    writer = make_task(tmp_path, "writer", WRITER.format(mark=mark))
    wrote = _line(_job(runner, writer, "candidate"), "WROTE")
    assert "/tmp" in wrote["dirs"] and "/dev/shm" in wrote["dirs"], wrote  # A did write
    assert wrote["key"] == -1, wrote  # the keyring is refused outright
    src = READER.format(head=mark[:16], tail=mark[16:], appended=wrote["files"])
    reading = make_task(tmp_path, "reader", src, reference=src)
    found = _line(_job(runner, reading, reader), "FOUND")
    if reader == "reference":
        assert found == [], found
    else:
        assert found and all(p.startswith("/kws/cache/") or p.startswith("content of /kws/cache/") for p in found), \
            found


def test_a_job_sees_only_its_own_devices(tmp_path, runner):
    """A job's /dev holds the nodes task code needs (and a GPU box's bound GPU nodes) and its
    own /dev/shm, read-only otherwise; the root of the sandbox is read-only too."""
    src = ("import os\n"
           "def add(x, y):\n"
           "    print('DEV ' + repr(sorted(os.listdir('/dev'))), flush=True)\n"
           "    print('W ' + repr([p for p in ('/', '/dev', '/kws', '/dev/shm', '/tmp') if os.access(p, os.W_OK)]))\n"
           "    return x + y\n")
    job = _job(runner, make_task(tmp_path, "dev", src), "candidate")
    dev = ast.literal_eval(next(ln[4:] for ln in job.stdout_tail.splitlines() if ln.startswith("DEV ")))
    writable = ast.literal_eval(next(ln[2:] for ln in job.stdout_tail.splitlines() if ln.startswith("W ")))
    nodes = {d for d in dev if not d.startswith("nvidia")} - {"fd", "stdin", "stdout", "stderr", "shm"}
    assert nodes <= {"null", "zero", "full", "random", "urandom", "tty"}, dev
    assert {"null", "zero", "urandom", "shm"} <= set(dev), dev
    assert writable == ["/dev/shm", "/tmp"], writable
