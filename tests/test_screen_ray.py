"""kws screen on a Ray cluster: two nodes on this machine, on loopback addresses (the head on
127.0.0.2, a worker node on 127.0.0.3; Ray replaces 127.0.0.1 itself by the machine's
address, so the test uses other loopback addresses), started and stopped by the test.

- GPU requests no node can satisfy end with a clear error after the schedule timeout;
- a hung run is force-cancelled (ray.cancel(force=True)) and leaves nothing running;
- a worker node killed mid-run loses no result: its run is retried on the head.

Skipped when Ray is not installed (``pip install 'kws[ray]'``; .ci/run installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from tests.conftest import write_task
from tests.hostile import HANGING_CANDIDATE, marked_processes, wait_until
from tests.recordkit import ALICE, isolate, set_repo_identity
from tests.screenkit import sample_queue_repo
from workstation.screen.keys import task_trees
from workstation.screen.run import ScreenOptions, plan_screen, run_plan
from workstation.screen.store import read_index

pytest.importorskip("ray", reason="Ray is not installed: pip install 'kws[ray]' (.ci/run installs it)")

REPO_ROOT = Path(__file__).resolve().parent.parent
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    address: str
    head: subprocess.Popen
    worker: subprocess.Popen
    tmp: Path


def _start_node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    ray = Path(sys.executable).with_name("ray")
    fh = log.open("wb")
    p = subprocess.Popen([str(ray), "start", "--block", "--disable-usage-stats", *args], stdout=fh,
                         stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "block forever" in text:
            return p
        if p.poll() is not None:
            break
        time.sleep(0.5)
    _kill(p)
    pytest.fail(f"ray start did not come up: {log.read_text(errors='replace')[-3000:]}")


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster():
    tmp = Path(tempfile.mkdtemp(prefix="kr", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    head = _start_node(["--head", f"--node-ip-address={HEAD_IP}", f"--port={port}", "--num-cpus=1",
                        "--include-dashboard=false", f"--temp-dir={tmp}",
                        f"--ray-client-server-port={_free_port()}",
                        f"--dashboard-agent-listen-port={_free_port()}"], tmp / "head.log", env)
    try:
        worker = _start_node([f"--address={HEAD_IP}:{port}", f"--node-ip-address={WORKER_IP}", "--num-cpus=1",
                              f"--dashboard-agent-listen-port={_free_port()}"], tmp / "worker.log", env)
    except BaseException:
        _kill(head)
        raise
    c = Cluster(f"{HEAD_IP}:{port}", head, worker, tmp)
    try:
        yield c
    finally:
        for p in (c.worker, c.head):
            _kill(p)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _backend(cluster: Cluster, **kw):
    from workstation.screen.raycluster import RayBackend

    return RayBackend(cluster.address, node_ip=HEAD_IP, **kw)


def test_gpu_requests_no_node_can_satisfy_end_with_a_clear_error(cluster, env):
    root = env / "q"
    sample_queue_repo(root, tasks=("copy-cast-oob",))
    p = subprocess.run([sys.executable, "-m", "workstation.cli.main", "screen", "--queue", str(root),
                        "--ray", cluster.address, "--ray-node-ip", HEAD_IP, "--gpus-per-task", "1",
                        "--schedule-timeout", "5", "--only", "correctness"],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert p.returncode == 3, p.stderr
    assert "no node of the cluster has 1 GPU" in p.stderr  # said at once
    assert "could not be scheduled: none started in 5 s" in p.stderr and "0 GPU" in p.stderr


def test_a_hung_run_is_force_cancelled_and_leaves_nothing_running(cluster, env):
    import uuid

    root = env / "q"
    # the candidate starts a child that sleeps too (found afterwards by the marker in its
    # command line: the sandboxed candidate cannot write a file outside its job), then hangs
    marker = f"kws-hung-{uuid.uuid4().hex}"
    write_task(root, "hangs", candidate=HANGING_CANDIDATE.format(marker=marker))
    repo = git.Repo.init(root, initial_branch="main")
    set_repo_identity(repo, ALICE)
    repo.git.add("--all")
    repo.git.commit("-qm", "q")
    # the supervisor's own limit (600 s) is far; the driver force-cancels 20 s after the start
    backend = _backend(cluster, grace_s=-580.0)
    opts = ScreenOptions(only=("correctness",), timeout=600)
    os.environ["KWS_STEP_TIMEOUT"] = "900"  # the runner's own step limit must not end it first
    try:
        run = run_plan(plan_screen(root, backend, opts), backend, opts)
    finally:
        os.environ.pop("KWS_STEP_TIMEOUT", None)
        backend.close()
    (res,) = run.results
    assert res.outcome == "timeout" and "force-cancelled" in res.message, res
    assert wait_until(lambda: not marked_processes(marker), seconds=30, every=0.2), marked_processes(marker)


def _has_descendant(pid: int, needle: str) -> bool:
    """True when a descendant of ``pid`` has ``needle`` in its command line."""
    import psutil

    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return False
    for k in kids:
        try:
            if needle in " ".join(k.cmdline()):
                return True
        except psutil.Error:
            pass
    return False


def test_a_worker_node_killed_mid_run_loses_no_result(cluster, env):
    tasks = ("copy-cast-oob", "relu-unwritten", "scale-rows-noncontig", "softmax-fp16-clean")
    root = env / "q"
    repo = sample_queue_repo(root, tasks=tasks)
    backend = _backend(cluster, schedule_timeout=240)
    opts = ScreenOptions(only=("correctness",), timeout=300)
    killed: list[str] = []

    def on_event(kind: str, data: dict) -> None:
        if kind == "started" and WORKER_IP in data["host"] and not killed:
            # mid-run: kill the node once its kws check has its fork server up (a process of
            # the worker node's tree), so the run cannot have finished before the kill
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not _has_descendant(cluster.worker.pid, "harness.forkserver"):
                time.sleep(0.05)
            os.killpg(cluster.worker.pid, signal.SIGKILL)
            killed.append(data["task"])

    try:
        plan = plan_screen(root, backend, opts)
        assert len(plan.envs) == 2 and {e.host.split("(")[-1].rstrip(")") for e in plan.envs} == {HEAD_IP, WORKER_IP}
        run = run_plan(plan, backend, opts, on_event=on_event)
    finally:
        backend.close()
    assert killed, "no run started on the worker node"
    by = {r.task: r for r in run.results}
    assert set(by) == set(tasks) and run.not_stored == [] and not run.interrupted
    assert all(r.outcome in ("pass", "fail") for r in run.results), [(r.task, r.message) for r in run.results]
    victim = by[killed[0]]
    assert victim.attempts == 2 and HEAD_IP in victim.host
    stored = read_index(repo)
    assert set(stored.by_tree) == set(task_trees(repo).values())
    assert json.loads(json.dumps([r.backend for r in run.results])) == ["ray"] * len(tasks)
