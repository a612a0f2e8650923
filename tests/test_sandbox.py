"""The sandbox around task code, attack by attack: each test asserts containment.

Attack classes (issue 11): secrets read from the parent's environment, the reviewer's home
or another process; the queue's ``.git/hooks`` and records written from a job; candidate
and reference reaching each other; a daemon outliving kws (also after ``SIGKILL`` of kws
and of the review app); forged evidence (a patched state snapshot, dispatch modes left
with ``_disable_current_modes()``); forged and oversized result files; hostile task
folders (symlinks out of the folder, to ``/dev/zero``, FIFOs); ``os._exit`` everywhere; a
hang; an inherited ``ulimit -v``; the sandbox-off path. Limits are injected small
(``KWS_STEP_TIMEOUT``, ``KWS_HANG_LIMIT``), never asserted as wall-clock time.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from tests.hostile import findings, make_task, marked_processes, result, wait_until
from workstation.engine.report import exit_code, to_json_dict
from workstation.engine.run import run_checks
from workstation.protocol.wire import (
    Budget,
    WireError,
    forging_changes,
    open_dir,
    read_step,
    read_tail,
)
from workstation.runner import Runner, taskcopy
from workstation.runner import bwrap as bw
from workstation.task.format import load_task

pytestmark = pytest.mark.skipif(not bw.find_bwrap() or bool(bw.probe(bw.find_bwrap() or "bwrap")),
                                reason="bubblewrap is not installed or cannot create namespaces here "
                                       "(.ci/run installs it)")
KWS = [sys.executable, "-m", "workstation.cli.main"]


def _kws(*args: str, env: dict[str, str] | None = None, timeout: float = 240,
         preexec: str = "") -> subprocess.CompletedProcess[str]:
    cmd = [*KWS, *args]
    if preexec:
        cmd = ["/bin/sh", "-c", f'{preexec}; exec "$@"', "kws", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, **(env or {})})


def _descendants(pid: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(name))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _alive(pids: set[int] | list[int]) -> list[int]:
    left = []
    for p in pids:
        try:
            st = Path(f"/proc/{p}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if st != b"Z":
            left.append(p)
    return left


def _wait_gone(pids: set[int] | list[int], seconds: float = 5.0) -> list[int]:
    wait_until(lambda: not _alive(pids), seconds)
    return _alive(pids)


def _summaries(res, check: str) -> str:
    return "\n".join(f.summary + json.dumps(f.evidence) for f in findings(res, check))


# --------------------------------------------------------------------------- what a job sees

VIEW = """
import os, socket, sys
ALLOWED = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)]

def _extra(top):
    # what lies under top besides the Python installation (whose folders are bound)
    found = []
    for dirpath, dirnames, files in os.walk(top):
        keep = []
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if any(a == p or a.startswith(p + '/') for a in ALLOWED):
                if not any(p == a or p.startswith(a + '/') for a in ALLOWED):
                    keep.append(d)
            else:
                found.append(p)
        dirnames[:] = keep
        found += [os.path.join(dirpath, f) for f in files]
    return found

def add(x, y):
    bad = []
    pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
    if len(pids) > 4 or 1 not in pids:
        bad.append(f'pids {{pids}}')
    for path in ({queue!r}, {secret_file!r}, '/kws/jobs', '/kws/caches', '/run', '/var/lib', '/mnt'):
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            bad.append('visible: ' + path)
    for top in ('/root', '/home', '/work'):
        bad += ['visible: ' + p for p in _extra(top)][:5]
    if os.getppid() != 0:  # the fork server is outside the job's pid namespace
        bad.append(f'parent visible as pid {{os.getppid()}}')
    for probe in (lambda: open('/proc/1/environ', 'rb').read(), lambda: os.listdir('/proc/1/root'),
                  lambda: open('/proc/1/mem', 'rb').read(1)):
        try:
            probe()
            bad.append('the namespace init is readable')
        except OSError:
            pass
    status = open('/proc/self/status').read()
    for line in status.splitlines():
        if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapAmb')) and line.split()[1].strip('0'):
            bad.append(line)
    for k in ('HOME', 'TMPDIR'):
        if not os.environ.get(k, '').startswith('/tmp'):
            bad.append(k + '=' + os.environ.get(k, ''))
    if not os.environ.get('TRITON_CACHE_DIR', '').startswith('/kws/cache/'):
        bad.append('cache ' + os.environ.get('TRITON_CACHE_DIR', ''))
    for target in ('/usr/kws-probe', '/etc/kws-probe', os.path.dirname(os.__file__) + '/kws-probe'):
        try:
            open(target, 'w')
            bad.append('wrote ' + target)
        except OSError:
            pass
    try:
        socket.create_connection(('127.0.0.1', 22), timeout=0.5)
        bad.append('network')
    except OSError:
        pass
    for name in os.listdir('/proc'):
        if name.isdigit():
            for f in ('environ', 'cmdline'):
                try:
                    text = open(f'/proc/{{name}}/{{f}}', 'rb').read()
                except OSError:
                    continue
                if b'{token}' in text:
                    bad.append('token in /proc/' + name + '/' + f)
    for p in ({secret_file!r}, os.path.expanduser('~/.ssh/id_rsa'), '/etc/shadow'):
        try:
            data = open(p).read()
            if '{key}' in data or 'root:' in data:
                bad.append('read ' + p)
        except OSError:
            pass
    assert not bad, bad
    return x + y
"""


def test_a_job_sees_only_its_own_sandbox(tmp_path, monkeypatch):
    token, key = f"ghp_{uuid.uuid4().hex}", f"ssh-key-{uuid.uuid4().hex}"
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text(key)
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", token)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    d = make_task(tmp_path, "view", VIEW.format(queue=str(tmp_path), secret_file=str(secret), token=token, key=key))
    with Runner() as fresh:  # started with the secrets in its environment
        assert fresh.device.sandbox == "bwrap"
        res = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
    doc = json.dumps(to_json_dict(res))
    assert result(res, "correctness").status == "pass", _summaries(res, "correctness")
    assert token not in doc and key not in doc
    assert to_json_dict(res)["sandbox"] == "bwrap"


def test_secrets_in_an_exception_never_reach_the_report(tmp_path, monkeypatch):
    token = f"ghp_{uuid.uuid4().hex}"
    key = tmp_path / "id_ed25519"
    key.write_text(f"KEY-{token}")
    monkeypatch.setenv("GITHUB_TOKEN", token)
    src = f"""
    import os
    def add(x, y):
        got = []
        for name in os.listdir('/proc'):
            for f in ('environ', 'cmdline'):
                try:
                    got.append(open(f'/proc/{{name}}/{{f}}', 'rb').read().decode(errors='replace'))
                except OSError:
                    pass
        for p in ({str(key)!r}, os.path.expanduser('~/.ssh/id_rsa')):
            try:
                got.append(open(p).read())
            except OSError as e:
                got.append(str(e))
        raise RuntimeError(' '.join(got) + ' ' + repr(dict(os.environ)))
    """
    d = make_task(tmp_path, "leak", src)
    with Runner() as fresh:
        res = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
    doc = json.dumps(to_json_dict(res))
    assert result(res, "correctness").status == "fail"
    assert "RuntimeError" in doc
    assert token not in doc


def _git_queue(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "user.email", "t@example.com"], check=True)
    subprocess.run(["git", "-C", str(root), "config", "user.name", "t"], check=True)
    (root / "records").mkdir()
    (root / "gold").mkdir()
    (root / "gold" / "answer.toml").write_text("overall = 'reject'\n")
    return root


def test_the_queue_repository_is_out_of_reach(tmp_path, runner):
    root = _git_queue(tmp_path / "queue")
    hooks = root / ".git" / "hooks"
    before = sorted(p.name for p in hooks.iterdir())
    marker = tmp_path / "hook-ran"
    src = f"""
    import os, glob
    HOOK = '#!/bin/sh\\ntouch {marker}\\n'
    def add(x, y):
        targets = [{str(hooks)!r}, os.path.join(os.getcwd(), '..', '..', '..', '.git', 'hooks')]
        for name in os.listdir('/proc'):
            targets.append(f'/proc/{{name}}/cwd/.git/hooks')
            targets.append(f'/proc/{{name}}/root{hooks}')
        for t in targets:
            try:
                with open(os.path.join(t, 'post-commit'), 'w') as f:
                    f.write(HOOK)
                os.chmod(os.path.join(t, 'post-commit'), 0o755)
            except OSError:
                pass
        for rec in ({str(root / 'records')!r}, '../../records'):
            try:
                open(os.path.join(rec, 'forged-accept.toml'), 'w').write('overall = "accept"\\n')
            except OSError:
                pass
        for g in glob.glob({str(root / 'gold') + '/*'!r}):
            raise RuntimeError('read gold ' + open(g).read())
        return x + y
    """
    d = make_task(root, "hooks", src)
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    assert result(res, "correctness").status == "pass", _summaries(res, "correctness")
    assert sorted(p.name for p in hooks.iterdir()) == before
    assert not list((root / "records").iterdir())
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "x"], check=True)
    assert not marker.exists()


def test_candidate_and_reference_never_share_a_view(tmp_path, runner):
    ref = """
    import os
    def add(x, y):
        for d in ('/tmp', os.environ['TRITON_CACHE_DIR'], '/kws/job'):
            open(os.path.join(d, 'kws-reference-was-here'), 'w').write('x')
        return x + y
    """
    cand = """
    import os
    def add(x, y):
        for top in ('/tmp', '/kws'):
            for dirpath, _, files in os.walk(top):
                assert 'kws-reference-was-here' not in files, dirpath
        return x + y
    """
    d = make_task(tmp_path, "share", cand, reference=ref)
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0, 1])
    assert result(res, "correctness").status == "pass", _summaries(res, "correctness")


def test_compiler_caches_are_per_run_and_role(tmp_path, runner):
    cand = """
    import os
    def add(x, y):
        c = os.environ['TRITON_CACHE_DIR']
        seen = sorted(os.listdir(c))
        open(os.path.join(c, 'poison'), 'w').write('x')
        raise RuntimeError('CACHE-LISTING ' + ','.join(seen) + ' END')
    """
    ref = """
    import os
    def add(x, y):
        open(os.path.join(os.environ['TRITON_CACHE_DIR'], 'refmark'), 'w').write('x')
        return x + y
    """
    d = make_task(tmp_path, "cache", cand, reference=ref, cases=[{"N": 8, "dtype": "float32"}])
    for _ in range(2):
        res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
        text = _summaries(res, "correctness")
        listing = text.split("CACHE-LISTING ", 1)[1].split(" END", 1)[0]
        assert "poison" not in listing and "refmark" not in listing, listing


# --------------------------------------------------------------------------- forged evidence

FORGE_SNAPSHOT = """
import time, torch
import workstation.harness.state as st
_clean = st.snapshot(False)
st.snapshot = lambda cuda: _clean
time.perf_counter = lambda: 0.0
torch.allclose = lambda *a, **k: True
def add(x, y):
    return x + y
"""


def test_a_forged_state_snapshot_is_detected(tmp_path, runner):
    d = make_task(tmp_path, "forge", FORGE_SNAPSHOT)
    res = run_checks(load_task(d), runner, only=["tampering"], seeds=[0])
    fails = findings(res, "tampering", "fail")
    assert fails, res.results
    text = " ".join(f.summary for f in fails)
    for what in ("time.perf_counter replaced", "torch.allclose replaced", "workstation.harness.state.snapshot"):
        assert what in text, text
    assert not findings(res, "tampering", "info") or all("no global state changed" not in f.summary
                                                          for f in findings(res, "tampering"))


HIDE_FALLBACK = """
import torch, triton, triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes

@triton.jit
def _touch(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, v, mask=offs < n)

def add(x, y):
    out = torch.empty_like(x)
    _touch[(1,)](out, 1, BLOCK=16)
    with _disable_current_modes():
        out.copy_(x + y)
    return out
"""


def test_work_hidden_from_the_dispatch_tracer_is_seen(tmp_path, runner):
    d = make_task(tmp_path, "hide", HIDE_FALLBACK, backend="triton")
    res = run_checks(load_task(d), runner, only=["fallback"], seeds=[0])
    fails = findings(res, "fallback", "fail")
    assert any("not through the dispatch-mode tracer" in f.summary and "aten.add" in f.summary for f in fails), \
        [f.summary for f in findings(res, "fallback")]


def test_stopping_the_independent_recorder_is_a_finding(tmp_path, runner):
    src = HIDE_FALLBACK.replace("    with _disable_current_modes():\n        out.copy_(x + y)\n",
                                "    torch.autograd._disable_profiler()\n    out.copy_(x + y)\n")
    d = make_task(tmp_path, "stopprof", src, backend="triton")
    res = run_checks(load_task(d), runner, only=["fallback"], seeds=[0])
    assert any("stopped the autograd profiler" in f.summary for f in findings(res, "fallback", "fail")), \
        [f.summary for f in findings(res, "fallback")]


def test_forged_result_files_are_failures(tmp_path, runner):
    garbage = """
    import os
    def add(x, y):
        open('/kws/job/out/step-0.json', 'w').write('{"ok": true, "outputs": [{"shape": [3]}], "extra": ')
        os._exit(0)
    """
    wellformed = """
    import json, os
    import numpy as np
    def add(x, y):
        z = (x + y).numpy().astype('float64')
        np.savez('/kws/job/out/step-0.npz', out0=z)
        json.dump({"ok": True, "outputs": [{"dtype": "float32", "shape": list(z.shape), "stride": [1]}],
                   "extra": {}, "seconds": 0.0}, open('/kws/job/out/step-0.json', 'w'))
        os._exit(0)
    """
    for name, src in (("garbage", garbage), ("wellformed", wellformed)):
        d = make_task(tmp_path, name, src)
        res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
        r = result(res, "correctness")
        assert r.status == "fail", (name, r)
        text = _summaries(res, "correctness")
        assert "cannot be trusted" in text or "refused" in text, (name, text)
        assert exit_code(to_json_dict(res)) == 1


def test_an_npz_bomb_from_a_job_is_refused(tmp_path, runner):
    src = """
    import os, json, zipfile
    def add(x, y):
        with zipfile.ZipFile('/kws/job/out/step-0.npz', 'w', zipfile.ZIP_DEFLATED) as z:
            with z.open('out0.npy', 'w', force_zip64=True) as m:
                m.write(b"\\x93NUMPY\\x01\\x00v\\x00{'descr': '<f8', 'fortran_order': False, 'shape': (134217728,), }"
                        .ljust(128 - 1, b' ') + b'\\n')
                chunk = bytes(1 << 20)
                for _ in range(256):
                    m.write(chunk)
        json.dump({"ok": True, "outputs": [{"dtype": "float64", "shape": [134217728], "stride": [1]}],
                   "extra": {}}, open('/kws/job/out/step-0.json', 'w'))
        os._exit(0)
    """
    import threading

    import psutil

    d = make_task(tmp_path, "bomb", src, cases=[{"N": 8, "dtype": "float32"}])
    me, peak, done = psutil.Process(), [0], threading.Event()
    before = me.memory_info().rss

    def sample() -> None:  # the parent's resident set while it reads the job's result
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            done.wait(0.005)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    finally:
        done.set()
        t.join()
    assert result(res, "correctness").status == "fail"
    # refused unread: files no hand-over to kws's fork server recorded (custody); a bomb that
    # did get recorded is refused as compressed (test_the_parent_refuses_compressed_and_oversized_arrays)
    text = _summaries(res, "correctness")
    assert "did not hand the step over" in text or "compressed" in text, text
    # the archive inflates to 1 GiB: reading it would have grown the parent by that much
    # (ru_maxrss cannot tell: it is the whole test session's peak)
    assert peak[0] - before < 256 << 20, (before, peak[0])


# --------------------------------------------------------------------------- the result channel


def _bomb(path: Path, inflated: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("out0.npy", "w", force_zip64=True) as m:
        m.write(b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % inflated)
        chunk = bytes(1 << 20)
        for _ in range(inflated >> 20):
            m.write(chunk)


def test_the_parent_refuses_compressed_and_oversized_arrays(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "step-0.json").write_text(json.dumps({"ok": True, "kind": "call",
                                                 "outputs": [{"dtype": "float64", "shape": [1 << 30], "stride": [1]}]}))
    _bomb(out / "step-0.npz", 1 << 30)
    assert (out / "step-0.npz").stat().st_size < 8 << 20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with pytest.raises(WireError, match="compressed"):
        read_step(out, 0)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss < 256 << 20
    # a stored member whose header claims more than it holds
    np.savez(out / "step-0.npz", out0=np.zeros(4))
    raw = (out / "step-0.npz").read_bytes().replace(b"'shape': (4,)", b"'shape': (9,)")
    (out / "step-0.npz").write_bytes(raw)
    with pytest.raises(WireError):
        read_step(out, 0)
    # the per-job budget
    np.savez(out / "step-0.npz", out0=np.zeros(1 << 16))
    (out / "step-0.json").write_text(json.dumps({"ok": True, "kind": "call",
                                                 "outputs": [{"dtype": "float64", "shape": [1 << 16], "stride": [1]}]}))
    with pytest.raises(WireError, match="cap"):
        read_step(out, 0, Budget(1 << 16))
    assert read_step(out, 0, Budget(1 << 20)).outputs[0].shape == (1 << 16,)


def test_results_are_never_followed_or_blocked_on(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("TOP-SECRET")
    out = tmp_path / "out"
    out.mkdir()
    (out / "step-0.json").symlink_to(secret)
    (out / "stdout.txt").symlink_to(secret)
    os.mkfifo(out / "step-1.json")
    with pytest.raises(WireError, match="symlink"):
        read_step(out, 0)
    with pytest.raises(WireError, match="not a regular file"):
        read_step(out, 1)  # a FIFO: refused at once, never read
    fd = open_dir(out)
    try:
        assert read_tail(fd, "stdout.txt", 100) == ("", 0)
    finally:
        os.close(fd)
    link = tmp_path / "outlink"
    link.symlink_to(out)
    with pytest.raises(WireError):
        open_dir(link)


def test_forging_changes_are_those_on_kws_result_path():
    seen = ["time.perf_counter replaced", "workstation.harness.state.snapshot replaced", "json.dumps replaced",
            "torch.allclose replaced", "numpy.savez replaced", "numpy.allclose replaced",
            "sys.modules.workstation.harness replaced"]
    assert forging_changes(seen) == ["workstation.harness.state.snapshot replaced", "json.dumps replaced",
                                     "numpy.savez replaced", "sys.modules.workstation.harness replaced"]


# --------------------------------------------------------------------------- hostile task folders


def test_hostile_task_folders_are_refused(tmp_path):
    good = make_task(tmp_path, "good", "def add(x, y):\n    return x + y\n")
    (good / "lib.py").write_text("A = 1\n")
    (good / "alias.py").symlink_to("lib.py")  # inside the folder: copied as a file
    dest = tmp_path / "copy"
    taskcopy.copy(good, dest)
    assert (dest / "alias.py").read_text() == "A = 1\n" and not (dest / "alias.py").is_symlink()
    cases = {
        "home": lambda d: (d / "key.py").symlink_to(Path.home() / ".ssh" / "id_rsa"),
        "outside": lambda d: (d / "x.py").symlink_to(tmp_path / "good" / "candidate.py"),
        "zero": lambda d: (d / "data.bin").symlink_to("/dev/zero"),
        "fifo": lambda d: os.mkfifo(d / "pipe"),
        "big": lambda d: (d / "big.bin").write_bytes(bytes(2 << 20)),
    }
    for name, plant in cases.items():
        d = make_task(tmp_path, name, "def add(x, y):\n    return x + y\n")
        plant(d)
        with pytest.raises(taskcopy.TaskFolderError) as e:
            taskcopy.scan(d, max_bytes=1 << 20)
        assert e.value.path, name


def test_kws_check_refuses_a_symlink_out_of_the_task(tmp_path):
    d = make_task(tmp_path, "link", "def add(x, y):\n    return x + y\n")
    (d / "secret.txt").symlink_to("/etc/hostname")
    p = _kws("check", str(d), "--json", "--only", "correctness", timeout=60)
    assert p.returncode == 2, p.stderr
    err = json.loads(p.stdout)["error"]
    assert err["file"].endswith("secret.txt") and "outside the task folder" in err["problem"]


# --------------------------------------------------------------------------- honest statuses


def test_os_exit_in_every_call_exits_nonzero(tmp_path, runner):
    exit0 = "import os\ndef add(x, y):\n    os._exit(0)\n"
    d = make_task(tmp_path, "exit-candidate", exit0)
    res = run_checks(load_task(d), runner, only=["correctness", "nondeterminism", "tampering", "stale-output"],
                     seeds=[0])
    doc = to_json_dict(res)
    assert exit_code(doc) == 1
    assert all(r.status == "fail" for r in res.results), [(r.check, r.status, r.reason) for r in res.results]
    assert "status 0 before reporting a result" in _summaries(res, "tampering")
    assert not doc["not_judged"]
    d = make_task(tmp_path, "exit-reference", "def add(x, y):\n    return x + y\n", reference=exit0)
    res = run_checks(load_task(d), runner, only=["correctness", "tampering"], seeds=[0])
    # the reference's death is the task's problem: not judged naming its file, never a candidate fail
    assert exit_code(to_json_dict(res)) == 4
    assert all(r.status in ("skip", "warn") for r in res.results), [(r.check, r.status) for r in res.results]
    assert all("the reference (reference.py:add)" in r.not_judged for r in res.results), res.results


def test_a_hang_is_cut_short_and_not_waited_for_again(tmp_path, runner, monkeypatch):
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "1.5")
    monkeypatch.setenv("KWS_HANG_LIMIT", "1")
    statuses: list[str] = []
    real = runner._run

    def counting(*a, **k):
        job = real(*a, **k)
        statuses.append(job.status)
        return job

    monkeypatch.setattr(runner, "_run", counting)
    d = make_task(tmp_path, "hang", "def add(x, y):\n    while True:\n        pass\n",
                  cases=[{"N": 64, "dtype": "float32"}, {"N": 100, "dtype": "float32"}])
    only = ["correctness", "nondeterminism", "stale-output", "tampering", "input-mutation"]
    res = run_checks(load_task(d), runner, only=only, seeds=[0, 1])
    assert exit_code(to_json_dict(res)) == 1
    # a check that met the hang fails; one whose calls kws no longer ran could not look:
    # not judged, naming the hang, never a pass
    got = {r.check: r.status for r in res.results}
    assert got["correctness"] == "fail" and set(got.values()) <= {"fail", "skip"}, got
    assert all("kws does not wait for it again" in r.not_judged for r in res.results if r.status == "skip"), \
        [r.not_judged for r in res.results]
    text = "\n".join(_summaries(res, c) for c in only)
    assert "did not finish within 3 CPU s (2 x its 1.5 CPU s budget" in text
    # after the first confirmed hang no candidate job starts, and those running when it was
    # recorded (at most one per other runner slot) are stopped, unless they hung as well
    assert 1 <= statuses.count("timeout") <= runner.max_parallel, statuses


def test_fail_closed_exit_codes(tmp_path):
    from workstation.engine.report import exit_code as code

    doc = {"findings": [], "checks": [{"check": "a", "status": "pass"}], "not_judged": []}
    assert code(doc) == 0
    doc["not_judged"] = [{"check": "b", "reason": "needs a GPU"}]
    assert code(doc) == 4  # no fail, but a check could not look: not a verdict
    doc["checks"].append({"check": "c", "status": "error"})
    doc["not_judged"] = []
    assert code(doc) == 4  # an error is not judged either
    doc["runner_failed"] = True
    assert code(doc) == 3
    doc["findings"] = [{"severity": "fail"}]
    assert code(doc) == 1


# --------------------------------------------------------------------------- nothing outlives kws

DAEMON = """
import os, subprocess, sys, time
def add(x, y):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'],
                             start_new_session=True)
            time.sleep(600)
        os._exit(0)
    {tail}
"""


def test_a_daemon_dies_with_its_job(tmp_path, runner):
    marker = f"kws-daemon-{uuid.uuid4().hex}"
    d = make_task(tmp_path, "daemon", DAEMON.format(marker=marker, tail="time.sleep(1)\n    return x + y"))
    res = run_checks(load_task(d), runner, only=["correctness"], seeds=[0])
    assert result(res, "correctness").status == "pass"
    assert _wait_gone(marked_processes(marker)) == []


def _nurseries(runner: Runner) -> list[int]:
    """The children of ``runner``'s fork server that outlive a job: its pid-namespace nursery."""
    mine = _descendants(runner.server_pid or -1)
    servers = []
    for p in marked_processes("workstation.harness.forkserver"):
        try:
            argv0 = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if p in mine and not argv0.endswith(b"bwrap"):
            servers.append(p)
    out = []
    for p in servers:
        try:
            ppid = int(Path(f"/proc/{p}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid in servers:
            out.append(p)
    return out


def test_a_killed_nursery_is_replaced_and_jobs_stay_sandboxed(tmp_path):
    d = make_task(tmp_path, "view", VIEW.format(queue=str(tmp_path), secret_file="/nonexistent",
                                                 token="ghp_none", key="ssh-key-none"))
    with Runner() as fresh:
        first = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
        assert result(first, "correctness").status == "pass", _summaries(first, "correctness")
        nurseries = _nurseries(fresh)
        assert len(nurseries) == 1, nurseries
        os.kill(nurseries[0], signal.SIGKILL)
        assert _wait_gone(nurseries) == []
        again = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
        assert result(again, "correctness").status == "pass", _summaries(again, "correctness")
        assert len(_nurseries(fresh)) == 1


WAIT_FOR_DAEMON = """for _ in range(600):
        if any(b'{marker}' in open(f'/proc/{{p}}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()):
            return x + y
        time.sleep(0.1)
    raise RuntimeError('the daemon did not start')"""


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_nothing_of_a_run_survives_kws(tmp_path, how):
    marker = f"kws-daemon-{uuid.uuid4().hex}"
    tail = "time.sleep(600)" if how == "sigkill" else WAIT_FOR_DAEMON.format(marker=marker)
    d = make_task(tmp_path, "daemon", DAEMON.format(marker=marker, tail=tail))
    p = subprocess.Popen([*KWS, "check", str(d), "--only", "correctness", "--seeds", "0"], cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={**os.environ, "KWS_STEP_TIMEOUT": "120"})
    try:
        if how == "exit":
            assert p.wait(timeout=240) == 0  # the candidate saw its daemon running, then returned
            assert _wait_gone(marked_processes(marker)) == []
            return
        wait_until(lambda: marked_processes(marker) or p.poll() is not None, seconds=180, every=0.2)
        assert marked_processes(marker), "the daemon never started"
        tree = _descendants(p.pid)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=120)
        assert _wait_gone(tree | set(marked_processes(marker))) == []
    finally:
        if p.poll() is None:
            p.kill()


APP = """
import sys, time
from pathlib import Path
from workstation.review.sources import RunnerCheckSource
src = RunnerCheckSource()
import threading
threading.Thread(target=src.run, args=(Path(sys.argv[1]), ['correctness'], lambda k, d: None), daemon=True).start()
print('started', flush=True)
time.sleep(600)
"""


def test_the_check_server_dies_with_the_app(tmp_path):
    marker = f"kws-daemon-{uuid.uuid4().hex}"
    d = make_task(tmp_path, "daemon", DAEMON.format(marker=marker, tail="time.sleep(600)"))
    app = subprocess.Popen([sys.executable, "-c", APP, str(d)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "KWS_STEP_TIMEOUT": "120"})
    try:
        wait_until(lambda: marked_processes(marker) or app.poll() is not None, seconds=180, every=0.2)
        assert marked_processes(marker), "the daemon never started"
        tree = _descendants(app.pid)
        app.kill()
        app.wait()
        assert _wait_gone(tree | set(marked_processes(marker))) == []
    finally:
        if app.poll() is None:
            app.kill()


# --------------------------------------------------------------------------- limits and the opt-out


def test_an_inherited_ulimit_is_respected_or_named(tmp_path):
    d = make_task(tmp_path, "plain", "def add(x, y):\n    return x + y\n")
    p = _kws("check", str(d), "--json", "--only", "correctness", "--seeds", "0", preexec="ulimit -v 12582912")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["checks"][0]["status"] == "pass"
    assert any("ulimit -v" in n for n in doc["isolation"]), doc["isolation"]
    p = _kws("check", str(d), "--only", "correctness", "--seeds", "0", preexec="ulimit -v 409600")
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    assert "ulimit -v" in p.stderr or "address-space" in p.stderr, p.stderr[-2000:]


def test_without_bwrap_kws_refuses_unless_the_reviewer_opts_out(tmp_path):
    d = make_task(tmp_path, "plain", "def add(x, y):\n    return x + y\n")
    p = _kws("check", str(d), "--only", "correctness", "--seeds", "0", env={"KWS_BWRAP": ""}, timeout=60)
    assert p.returncode == 3
    assert "apt-get install bubblewrap" in p.stderr and "--no-sandbox" in p.stderr
    p = _kws("check", str(d), "--json", "--no-sandbox", "--only", "correctness", "--seeds", "0",
             env={"KWS_BWRAP": ""})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["sandbox"] == "none" and doc["checks"][0]["status"] == "pass"


def test_the_config_key_turns_the_sandbox_off(tmp_path, monkeypatch):
    from workstation.runner.policy import sandbox_mode
    from workstation.schema.problem import Problem

    monkeypatch.delenv("KWS_SANDBOX", raising=False)
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    assert sandbox_mode() == "bwrap"
    (tmp_path / "config.toml").write_text('sandbox = "none"\n')
    assert sandbox_mode() == "none"
    assert sandbox_mode("none") == "none"
    (tmp_path / "config.toml").write_text('sandbox = "off"\n')
    with pytest.raises(Problem, match="sandbox"):
        sandbox_mode()
    (tmp_path / "config.toml").write_text('sandbox = "none"\n')
    d = make_task(tmp_path, "plain", "def add(x, y):\n    return x + y\n")
    with Runner() as r:
        res = run_checks(load_task(d), r, only=["correctness"], seeds=[0])
    doc = to_json_dict(res)
    assert doc["sandbox"] == "none" and result(res, "correctness").status == "pass"
    assert any("sandbox none" in n for n in doc["isolation"])


def test_the_sandbox_argv_binds_no_home_and_no_checkout(tmp_path):
    pkg = REPO / "workstation"
    argv = bw.sandbox_argv("bwrap", jobs=tmp_path / "j", caches=tmp_path / "c", pkg_dir=pkg)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--dev-bind")]
    assert str(REPO) not in binds and str(REPO / "sample_queue") not in binds
    assert str(Path.home()) not in binds
    assert str(pkg) in binds and "--die-with-parent" in argv and "--new-session" in argv
    writable = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert writable == [str(tmp_path / "j"), str(tmp_path / "c")]



def test_a_script_in_tmp_does_not_put_the_hosts_tmp_in_the_sandbox(tmp_path, monkeypatch):
    """``python /tmp/x.py`` puts /tmp on sys.path: binding it would show the host's /tmp to
    task code and lay it read-only over the sandbox's own (the fork server could not start)."""
    script = tmp_path / "drive.py"
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.setattr(sys, "path", [str(tmp_path), "/tmp", "/var/tmp", *sys.path])
    dirs = bw.python_dirs(REPO)
    assert str(tmp_path.resolve()) not in dirs and "/tmp" not in dirs and "/var/tmp" not in dirs
    assert str(Path(sys.prefix).resolve()) in dirs or any(str(Path(sys.prefix).resolve()).startswith(d + "/")
                                                          for d in dirs + list(bw.SYSTEM_DIRS))

_ESCAPES = r"""
import sys
OSC52 = '\x1b]52;c;ZWNobyBwd25lZA==\x07'
def add(x, y):
    print(OSC52 + '\x1b]0;owned\x07\x9b2J', flush=True)
    print(OSC52, file=sys.stderr, flush=True)
    raise type('E' * 1_500_000, (Exception,), {})(OSC52 + ' \x1b]8;;http://evil\x1b\\link')
"""


def test_escape_sequences_and_a_huge_exception_name_from_task_code_are_made_safe(tmp_path, monkeypatch):
    """A candidate printing OSC 52 (clipboard write), OSC 8/0 and CSI and raising an
    exception whose class name is 1.5 MB: the JSON and the text report hold no ESC or C1
    byte, the texts are cut with their size and hash, and a verdict with that report commits."""
    from tests.recordkit import ALICE, isolate, make_queue, verdict
    from workstation.engine.report import to_text

    d = make_task(tmp_path, "osc", _ESCAPES)
    with Runner() as fresh:
        res = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
    doc = to_json_dict(res)
    js, text = json.dumps(doc), to_text(doc, verbose=True)
    assert result(res, "correctness").status == "fail"
    for out in (js, text):
        assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert "\\x1b]52;" in js and "sha256 " in js and len(js) < 1_000_000
    assert "\x1b" not in text and "EEEE" in text
    (tmp_path / "q").mkdir()
    isolate(monkeypatch, tmp_path / "q")
    repo = make_queue(tmp_path / "q" / "repo")
    v = verdict(repo, "alpha", ALICE, overall="reject", report=doc)
    assert v.findings and "\x1b" not in (tmp_path / "q" / "repo" / v.path).read_text()


_SHM_REFERENCE = """\
def add(x, y):
    with open('/dev/shm/kws-answer', 'w') as f:  # the reference publishes its answer
        f.write('42')
    return x + y
"""
_SHM_CANDIDATE = """\
import errno, os
def add(x, y):
    if os.path.exists('/dev/shm/kws-answer'):
        raise RuntimeError('saw the reference job /dev/shm')
    st = os.statvfs('/dev/shm')
    if st.f_blocks * st.f_frsize != 256 << 20:
        raise RuntimeError(f'/dev/shm is {st.f_blocks * st.f_frsize} bytes, not a private 256 MiB tmpfs')
    chunk = b'x' * (1 << 20)
    try:  # many files, each under the file-size limit: the tmpfs's size stops them
        for i in range(3):
            with open(f'/dev/shm/fill{i}', 'wb') as f:
                for _ in range(100):
                    f.write(chunk)
                    f.flush()
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        for i in range(3):
            if os.path.exists(f'/dev/shm/fill{i}'):
                os.unlink(f'/dev/shm/fill{i}')
        return x + y
    raise RuntimeError('wrote 300 MiB to /dev/shm')
"""


def test_dev_shm_is_private_to_each_job_and_capped(tmp_path):
    """The reference's job writes its answer to /dev/shm; the candidate's job (a later
    job of the same sandbox) does not see it, its own /dev/shm is a 256 MiB tmpfs, and a
    write past that fails with ENOSPC inside the job while kws goes on (correctness passes)."""
    d = make_task(tmp_path, "shm", _SHM_CANDIDATE, reference=_SHM_REFERENCE)
    with Runner() as fresh:
        res = run_checks(load_task(d), fresh, only=["correctness"], seeds=[0])
    r = result(res, "correctness")
    assert r.status == "pass", _summaries(res, "correctness")
