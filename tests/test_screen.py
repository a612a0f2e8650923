"""kws screen on the local pool: keys, the stored results (git notes) and their exchange, the
supervisor, the timing gate, the plan, the summary, the queue screen's pre-screen columns,
the replay into a review session, and real screens of sample tasks (`--only correctness`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import git
import psutil
import pytest

from tests.conftest import write_task
from tests.hostile import HANGING_CANDIDATE, marked_processes, wait_until
from tests.recordkit import ALICE, BOB, isolate, make_remote, set_repo_identity
from tests.screenkit import CHEAP, ENV, FakeBackend, sample_queue_repo
from workstation.review.queueview import (
    QueueRow,
    TaskSummary,
    build_rows,
    parse_filter,
    scan_queue,
    sort_rows,
)
from workstation.review.session import ReviewSession
from workstation.review.sources import RunnerCheckSource
from workstation.screen.keys import NodeEnv, ScreenKey, dirty_tasks, shared_folder, task_trees
from workstation.screen.local import NodeGate
from workstation.screen.run import ScreenOptions, plan_screen, run_plan
from workstation.screen.store import (
    INDEX_REF,
    ScreenResult,
    read_index,
    read_report,
    store_result,
    sync_notes,
)
from workstation.screen.summary import (
    PrescreenBadge,
    badges,
    queue_summary,
    stored_run,
    to_json,
    to_markdown,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


# --------------------------------------------------------------------------------------------
# keys


def test_every_part_of_the_key_changes_its_digest():
    base = dict(task="t", tree="a" * 40, shared=None, checks=("correctness",), seeds=(0, 1, 2), args=(),
                env=ENV, modules={"torch"})
    d0 = ScreenKey.of(**base).digest()
    assert ScreenKey.of(**base).digest() == d0  # deterministic
    variants = [
        {"tree": "b" * 40}, {"shared": "c" * 40}, {"checks": ("correctness", "edge-shapes")}, {"seeds": (0,)},
        {"args": ("--device", "cpu")}, {"modules": {"torch", "liger_kernel"}},
        {"env": NodeEnv(ENV.device, {**ENV.versions, "torch": "2.14.0"}, ENV.libs)},
        {"env": NodeEnv(ENV.device, {**ENV.versions, "kws": "0.2.0"}, ENV.libs)},
        {"env": NodeEnv("cuda (NVIDIA H200)", ENV.versions, ENV.libs)},
        {"env": NodeEnv(ENV.device, ENV.versions, {"torch": "torch 2.14.0"})},
    ]
    digests = {ScreenKey.of(**{**base, **v}).digest() for v in variants}
    assert len(digests) == len(variants) and d0 not in digests
    # what the run saw wins over the probe: a report's device and versions
    k = ScreenKey.of(**base, report={"device": "cuda", "versions": {"torch": "9.9"}})
    assert k.device == "cuda" and k.versions["torch"] == "9.9"
    # the host a result ran on is not part of it: any node with the same environment matches
    assert ScreenKey.of(**{**base, "env": NodeEnv(ENV.device, ENV.versions, ENV.libs, host="other")}).digest() == d0


def test_task_versions_dirty_tasks_and_the_shared_folder(env):
    repo = sample_queue_repo(env / "q", tasks=("copy-cast-oob", "relu-unwritten"))
    trees = task_trees(repo)
    assert set(trees) == {"copy-cast-oob", "relu-unwritten"} and all(len(t) == 40 for t in trees.values())
    assert dirty_tasks(repo) == (set(), False)
    (env / "q" / "tasks" / "relu-unwritten" / "new.py").write_text("x = 1\n")
    assert dirty_tasks(repo) == ({"relu-unwritten"}, False)
    assert shared_folder(env / "q") is None
    (env / "q" / "helpers").mkdir()
    (env / "q" / "helpers" / "shim.py").write_text("y = 2\n")
    assert shared_folder(env / "q") == "helpers"
    assert dirty_tasks(repo, ["helpers"]) == ({"relu-unwritten"}, True)
    (env / "q" / "queue.toml").write_text('name = "q"\nhelpers = "helpers"\n')
    assert shared_folder(env / "q") == "helpers"
    (env / "q" / "queue.toml").write_text('name = "q"\nhelpers = "../outside"\n')
    assert shared_folder(env / "q") == "helpers"  # a folder outside the queue is never taken


# --------------------------------------------------------------------------------------------
# the store and its exchange


def _result(tree: str, key: str, worst: str = "fail", finished: str = "2026-01-01T00:00:00+00:00",
            task: str = "alpha", **kw) -> ScreenResult:
    return ScreenResult(key=key, task=task, tree=tree, outcome="fail" if worst == "fail" else "pass",
                        worst=worst, finished=finished, kws="0.1.0", host="h", backend="local", **kw)


def test_results_append_and_two_clones_exchange_them_without_loss(env):
    bare, (a, b) = make_remote(env, 2)
    set_repo_identity(a, ALICE)
    set_repo_identity(b, BOB)
    tree = task_trees(a)["alpha"]
    assert task_trees(b)["alpha"] == tree
    store_result(a, _result(tree, "k-a", failing=("correctness",)), {"checks": [], "findings": [], "by": "a"})
    store_result(a, _result(tree, "k-a", worst="pass", finished="2026-01-02T00:00:00+00:00"), None)
    store_result(b, _result(tree, "k-b"), {"checks": [], "findings": [], "by": "b"})
    ia = read_index(a)
    assert [r.key for r in ia.by_tree[tree]] == ["k-a", "k-a"]
    assert ia.for_key("k-a", tree).worst == "pass"  # the latest line of a key wins
    assert read_report(a, tree, "k-a")["by"] == "a"
    sync_notes(a, "origin")
    got = sync_notes(b, "origin")
    assert got[INDEX_REF] == 1
    sync_notes(a, "origin")
    for repo in (a, b):
        idx = read_index(repo)
        assert sorted(r.key for r in idx.by_tree[tree]) == ["k-a", "k-a", "k-b"]
        assert read_report(repo, tree, "k-b")["by"] == "b" and read_report(repo, tree, "k-a")["by"] == "a"
    # a third clone gets everything from the remote
    c = git.Repo.clone_from(str(bare), env / "clone-c")
    set_repo_identity(c, ALICE)
    sync_notes(c, "origin")
    assert read_index(c).keys() == {"k-a", "k-b"}
    # a line that does not decode is skipped and counted, never fatal
    a.git.notes("--ref", INDEX_REF, "append", "-m", "{not json", tree)
    idx = read_index(a)
    assert idx.problems == 1 and idx.keys() == {"k-a", "k-b"}


# --------------------------------------------------------------------------------------------
# the supervisor


def _supervise(tmp: Path, timeout: float, script: str) -> tuple[int, list[int]]:
    pids = tmp / "pids"
    code = subprocess.run([sys.executable, "-m", "workstation.screen.supervise", "--timeout", str(timeout),
                           "--", "bash", "-c", script.replace("PIDS", str(pids))], cwd=REPO_ROOT,
                          timeout=120).returncode
    return code, [int(x) for x in pids.read_text().split()] if pids.exists() else []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_supervisor_kills_the_whole_tree_at_the_limit(tmp_path):
    # a double fork, a new session: neither escapes the subreaper
    code, pids = _supervise(tmp_path, 3, "(setsid sleep 600 & echo $! >> PIDS) ; sleep 600 & echo $! >> PIDS; wait")
    assert code == 124 and len(pids) == 2
    assert not any(_alive(p) for p in pids)


def test_supervisor_cleans_up_what_a_finished_command_left(tmp_path):
    code, pids = _supervise(tmp_path, 60, "(setsid sleep 600 & echo $! >> PIDS); exit 7")
    assert code == 7 and len(pids) == 1 and not _alive(pids[0])


def test_supervisor_on_sigterm_kills_the_tree(tmp_path):
    pids = tmp_path / "pids"
    p = subprocess.Popen([sys.executable, "-m", "workstation.screen.supervise", "--timeout", "600", "--",
                          "bash", "-c", f"setsid sleep 600 & echo $! >> {pids}; sleep 600"], cwd=REPO_ROOT)
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    p.terminate()
    assert p.wait(timeout=60) == 128 + 15
    assert not _alive(int(pids.read_text().split()[0]))


# --------------------------------------------------------------------------------------------
# the timing gate


def test_the_gate_never_lets_a_timing_run_share_the_machine():
    gate = NodeGate()
    seen: list[tuple[str, int, bool]] = []
    lock = threading.Lock()

    def worker(exclusive: bool, n: int) -> None:
        for _ in range(n):
            with gate.hold(exclusive) as ok:
                assert ok
                shared, excl = gate.busy
                with lock:
                    seen.append(("x" if exclusive else "s", shared, excl))
                time.sleep(0.002)

    threads = [threading.Thread(target=worker, args=(False, 40)) for _ in range(3)]
    threads += [threading.Thread(target=worker, args=(True, 10)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(seen) == 3 * 40 + 2 * 10
    assert all(shared == 0 and excl for kind, shared, excl in seen if kind == "x")
    assert all(not excl and shared >= 1 for kind, shared, excl in seen if kind == "s")


# --------------------------------------------------------------------------------------------
# the plan and the run, on a backend that runs nothing


def test_plan_splits_timing_work_stores_and_then_screens_nothing(env):
    repo = sample_queue_repo(env / "q", tasks=("bench-honest", "copy-cast-oob"))
    root = env / "q"
    fake = FakeBackend()
    opts = ScreenOptions()
    plan = plan_screen(root, fake, opts)
    by = {tp.task: tp for tp in plan.tasks}
    # bench-honest has an author's bench and a speedup claim: its timing checks get a run alone
    assert set(by["bench-honest"].timing) == {"benchmark-bias", "speedup-claim"}
    assert not set(by["bench-honest"].main) & {"benchmark-bias", "speedup-claim"}
    # copy-cast-oob's timing checks have nothing to judge: they stay in the main run (and skip)
    assert by["copy-cast-oob"].timing == () and "speedup-claim" in by["copy-cast-oob"].main
    run = run_plan(plan, fake, opts)
    specs = [(s.task, s.part, s.exclusive) for s in fake.specs]
    assert ("bench-honest", "timing", True) in specs and ("copy-cast-oob", "timing", True) not in specs
    # the timing run is asked for only after the main run finished
    assert specs.index(("bench-honest", "main", False)) < specs.index(("bench-honest", "timing", True))
    assert {r.task for r in run.results} == {"bench-honest", "copy-cast-oob"} and not run.not_stored
    rep = run.reports["bench-honest"]
    assert [c["check"] for c in rep["checks"]] == list(by["bench-honest"].checks)  # report order
    assert rep["task_tree"] == task_trees(repo)["bench-honest"] and rep["screen"]["timing"] == "run"
    idx = read_index(repo)
    assert len(idx.keys()) == 2
    again = plan_screen(root, FakeBackend(), opts)
    assert again.tasks == [] and {t for t, _ in again.skipped} == {"bench-honest", "copy-cast-oob"}
    assert len(plan_screen(root, FakeBackend(), ScreenOptions(force=True)).tasks) == 2
    # another environment (a GPU node) is another key
    gpu = NodeEnv("cuda", {**ENV.versions}, ENV.libs, host="gpu-1")
    assert len(plan_screen(root, FakeBackend(gpu), opts).tasks) == 2


def test_timing_off_says_so_and_a_later_screen_with_timing_runs_it(env):
    sample_queue_repo(env / "q", tasks=("bench-honest",))
    root = env / "q"
    fake = FakeBackend()
    run = run_plan(plan_screen(root, fake, ScreenOptions(timing=False)), fake, ScreenOptions(timing=False))
    (res,) = run.results
    assert res.timing.startswith("not run") and "--no-timing" in res.timing
    statuses = {c["check"]: (c["status"], c["reason"]) for c in run.reports["bench-honest"]["checks"]}
    assert statuses["speedup-claim"][0] == "skip" and "--no-timing" in statuses["speedup-claim"][1]
    assert not run.reports["bench-honest"]["complete"]
    assert [s.part for s in fake.specs] == ["main"]
    assert plan_screen(root, FakeBackend(), ScreenOptions(timing=False)).tasks == []
    assert [t.task for t in plan_screen(root, FakeBackend(), ScreenOptions()).tasks] == ["bench-honest"]


def test_runs_that_fail_for_other_reasons_are_not_stored(env):
    from workstation.screen.worker import RunOutcome

    sample_queue_repo(env / "q", tasks=("copy-cast-oob", "relu-unwritten"))
    root = env / "q"

    def outcome(spec):
        status = "lost" if spec.task == "copy-cast-oob" else "timeout"
        return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status=status, host="h",
                          stderr_tail="NodeDiedError: gone" if status == "lost" else "time limit",
                          finished="2026-01-01T00:00:01+00:00", attempts=2 if status == "lost" else 1)

    fake = FakeBackend(outcome_for=outcome)
    opts = ScreenOptions(only=("correctness",), timeout=30)
    run = run_plan(plan_screen(root, fake, opts), fake, opts)
    by = {r.task: r for r in run.results}
    assert by["copy-cast-oob"].outcome == "error" and by["copy-cast-oob"].attempts == 2
    assert [t for t, _ in run.not_stored] == ["copy-cast-oob"]  # the cluster's doing: next screen tries again
    assert by["relu-unwritten"].outcome == "timeout"  # the task's doing: stored
    assert [t.task for t in plan_screen(root, FakeBackend(), opts).tasks] == ["copy-cast-oob"]
    # a stored timeout counts only under a limit at least as long
    assert [t.task for t in plan_screen(root, FakeBackend(), ScreenOptions(only=("correctness",), timeout=60)).tasks] \
        == ["copy-cast-oob", "relu-unwritten"]


# --------------------------------------------------------------------------------------------
# the summary, the queue screen's columns, the replay


def _screened_queue(env: Path) -> tuple[git.Repo, Path]:
    repo = sample_queue_repo(env / "q", tasks=("copy-cast-oob", "relu-unwritten", "scale-rows-noncontig"))
    root = env / "q"
    from workstation.screen.worker import RunOutcome

    def outcome(spec):
        fail = spec.task == "relu-unwritten"
        err = spec.task == "scale-rows-noncontig"
        checks = [{"check": c, "status": "fail" if fail and c == "unwritten-output" else
                   ("error" if err and c == "correctness" else "pass"), "seconds": 0.5, "reason": ""}
                  for c in spec.only]
        findings = [{"check": "unwritten-output", "severity": "fail", "summary": "out[3:] never written",
                     "evidence": {}, "repro": f"kws check tasks/{spec.task} --only unwritten-output"}] if fail else []
        report = {"task": spec.task, "task_tree": None, "device": ENV.device, "complete": not err,
                  "versions": dict(ENV.versions), "seeds": [0, 1, 2], "findings": findings, "checks": checks,
                  "title": spec.task, "seconds": 1.0, "warnings": []}
        return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="ok", exit_code=int(fail),
                          report=report, host="node-7", finished="2026-01-01T00:00:01+00:00", seconds=2.0,
                          libs=dict(ENV.libs))

    fake = FakeBackend(outcome_for=outcome)
    opts = ScreenOptions(only=("correctness", "unwritten-output"))
    run_plan(plan_screen(root, fake, opts), fake, opts)
    return repo, root


def test_summary_sorts_by_worst_and_counts_check_errors(env):
    repo, root = _screened_queue(env)
    s = queue_summary(root)
    # a check that ended in error: the task is not judged (kws check exits 4), never clean
    assert [r.task for r in s.rows] == ["relu-unwritten", "scale-rows-noncontig", "copy-cast-oob"]
    assert [r.result.worst for r in s.rows] == ["fail", "not-judged", "pass"]
    assert s.rows[1].result.not_judged == ("correctness",) and s.totals["not_judged"] == 1
    assert s.totals["check_errors"] == 1 and s.totals["checks"] == 6 and s.totals["screened"] == 3
    md = to_markdown(s)
    assert "| relu-unwritten | fail | unwritten-output |  | 0/2 |" in md
    assert "| scale-rows-noncontig | not-judged |  | correctness | 1/2 |" in md
    assert "1 task(s) had checks that could not look" in md
    assert "check error rate 16.7% (1 of 6 checks)" in md and "node-7" in md
    doc = json.loads(to_json(s))
    assert doc["tasks"][0]["failing"] == ["unwritten-output"] and doc["totals"]["devices"] == {ENV.device: 3}
    # a task changed in the work tree: its pre-screen is of the committed version, and says so
    cand = root / "tasks" / "copy-cast-oob" / "candidate.py"
    cand.write_text(cand.read_text() + "\n# edited\n")
    assert badges(repo, root)["copy-cast-oob"].stale and not badges(repo, root)["relu-unwritten"].stale


def test_queue_rows_show_filter_and_sort_by_the_prescreen(env):
    repo, root = _screened_queue(env)
    ix = scan_queue(root)
    rows = build_rows(ix, screens=badges(repo, root))
    by = {r.id: r for r in rows}
    assert by["relu-unwritten"].screen.worst == "fail" and by["relu-unwritten"].screen.failing == ("unwritten-output",)
    assert by["scale-rows-noncontig"].screen.errored == ("correctness",)

    def shown(text: str) -> list[str]:
        f = parse_filter(text)
        assert not f.problems
        return sorted(r.id for r in rows if f.matches(r))

    assert shown("screen:fail") == ["relu-unwritten"]
    assert shown("screen:pass") == ["copy-cast-oob"]
    assert shown("screen:not-judged") == ["scale-rows-noncontig"]
    assert shown("failing:unwritten") == ["relu-unwritten"]
    assert shown("failing:corr") == ["scale-rows-noncontig"]  # errored checks count
    unscreened = QueueRow(TaskSummary("new", "t", "generation", "triton", "pass", "", "/", True))
    assert parse_filter("screen:none").matches(unscreened) and not parse_filter("screen:any").matches(unscreened)
    order = [r.id for r in sort_rows([*rows, unscreened], "screen")]
    assert order[0] == "relu-unwritten" and order[-1] == "new"
    assert PrescreenBadge(worst="timeout").rank < PrescreenBadge(worst="warn").rank


def test_opening_a_screened_task_replays_its_findings_at_once(env):
    repo, root = _screened_queue(env)
    got = stored_run(root, "relu-unwritten")
    assert got is not None and got.tree == task_trees(repo)["relu-unwritten"]
    kinds = [k for k, _ in got.events]
    assert kinds == ["start", "check_finished", "check_finished", "done"]
    assert got.events[0][1]["prescreen"]["host"] == "node-7"
    s = ReviewSession("relu-unwritten", root, None)
    for kind, data in got.events:
        s.apply_event(kind, data)
    assert s.rows["unwritten-output"].status == "fail" and s.rows["correctness"].status == "pass"
    assert s.prescreen["host"] == "node-7" and s.prescreen["backend"] == "fake"  # the provenance travels
    assert s.findings[0]["summary"] == "out[3:] never written"
    # the check source serves it once per version; the next full run is a fresh one
    src = RunnerCheckSource()
    events: list[str] = []
    assert src._replay(root / "tasks" / "relu-unwritten", lambda k, d: events.append(k)) is not None
    assert events == kinds
    assert src._replay(root / "tasks" / "relu-unwritten", lambda k, d: None) is None
    src.close()
    # an uncommitted change: the findings would not be of what the reviewer sees
    (root / "tasks" / "copy-cast-oob" / "extra.py").write_text("z = 3\n")
    assert stored_run(root, "copy-cast-oob") is None


# --------------------------------------------------------------------------------------------
# real screens (kws check runs, --only correctness)


def _kws_screen(root: Path, *args: str, env_extra: dict[str, str] | None = None) -> tuple[int, dict, str]:
    env = {**os.environ, **(env_extra or {})}
    p = subprocess.run([sys.executable, "-m", "workstation.cli.main", "screen", "--queue", str(root), "--json",
                        *args], capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=600)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {}, p.stderr


@pytest.mark.slow
def test_local_screen_stores_then_skips_then_rescreens_a_changed_task(env):
    repo = sample_queue_repo(env / "q", tasks=CHEAP)
    root = env / "q"
    code, out, err = _kws_screen(root, "--only", "correctness", "--workers", "2")
    assert code == 0, err
    assert sorted(r["task"] for r in out["screened"]) == sorted(CHEAP) and out["not_stored"] == []
    assert all(r["outcome"] in ("pass", "fail") and r["device"] for r in out["screened"])
    trees = task_trees(repo)
    idx = read_index(repo)
    assert set(idx.by_tree) == set(trees.values())
    rep = read_report(repo, trees["copy-cast-oob"], idx.by_tree[trees["copy-cast-oob"]][0].key)
    assert rep["task_tree"] == trees["copy-cast-oob"] and [c["check"] for c in rep["checks"]] == ["correctness"]
    assert str(env) not in json.dumps(rep)  # nothing of the worker's temporary folders
    # nothing changed: nothing is screened
    code, out, err = _kws_screen(root, "--only", "correctness")
    assert code == 0 and out["screened"] == [], err
    assert {x["task"] for x in out["left_out"]} == set(CHEAP)
    # a committed change is screened again (and stored); an uncommitted one is screened, not stored
    changed = root / "tasks" / "copy-cast-oob" / "candidate.py"
    changed.write_text(changed.read_text() + "\n# reviewed: no functional change\n")
    repo.git.commit("-qam", "touch copy-cast-oob")
    dirty = root / "tasks" / "relu-unwritten" / "candidate.py"
    dirty.write_text(dirty.read_text() + "\n# work in progress\n")
    code, out, err = _kws_screen(root, "--only", "correctness", "--workers", "2")
    assert code == 0, err
    assert sorted(r["task"] for r in out["screened"]) == ["copy-cast-oob", "relu-unwritten"]
    assert [x["task"] for x in out["not_stored"]] == ["relu-unwritten"]
    assert "uncommitted" in out["not_stored"][0]["why"]
    new_tree = task_trees(repo)["copy-cast-oob"]
    assert new_tree != trees["copy-cast-oob"] and new_tree in read_index(repo).by_tree
    assert trees["relu-unwritten"] in read_index(repo).by_tree  # the old version's result stays
    p = subprocess.run([sys.executable, "-m", "workstation.cli.main", "screen", "--queue", str(root), "--summary"],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert p.returncode == 0 and "3 tasks, 3 screened" in p.stdout and "(stale)" in p.stdout


@pytest.mark.slow
def test_a_hung_task_is_stopped_at_the_limit_and_nothing_is_left_running(env):
    import uuid

    import git as _git

    root = env / "q"
    # the candidate starts a child that sleeps too (found afterwards by the marker in its
    # command line: the sandboxed candidate cannot write a file outside its job), then hangs
    marker = f"kws-hung-{uuid.uuid4().hex}"
    write_task(root, "hangs", candidate=HANGING_CANDIDATE.format(marker=marker))
    repo = _git.Repo.init(root, initial_branch="main")
    set_repo_identity(repo, ALICE)
    repo.git.add("--all")
    repo.git.commit("-qm", "q")
    code, out, err = _kws_screen(root, "--only", "correctness", "--timeout", "20",
                                 env_extra={"KWS_STEP_TIMEOUT": "600"})
    assert code == 0, err
    (res,) = out["screened"]
    assert res["outcome"] == "timeout" and "20 s" in res["message"], res
    # nothing of the run survives 5 s after kws screen exits
    assert wait_until(lambda: not marked_processes(marker)), marked_processes(marker)
    assert read_index(repo).by_tree[task_trees(repo)["hangs"]][0].outcome == "timeout"


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_keeps_what_finished(env):
    import signal
    import uuid

    repo = sample_queue_repo(env / "q", tasks=CHEAP)
    root = env / "q"
    # a task that never returns, screened last (one worker, queue order): Ctrl-C always finds
    # a run under way, however slowly the machine gets through the cheap tasks
    marker = f"kws-ctrlc-{uuid.uuid4().hex}"
    write_task(root, "zz-hangs", candidate=HANGING_CANDIDATE.format(marker=marker))
    repo.git.add("--all")
    repo.git.commit("-qm", "a task that hangs")
    p = subprocess.Popen([sys.executable, "-m", "workstation.cli.main", "screen", "--queue", str(root), "--json",
                          "--only", "correctness", "--workers", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, start_new_session=True,
                         env={**os.environ, "KWS_STEP_TIMEOUT": "600"},
                         # a shell starts background jobs with SIGINT ignored and Python keeps it
                         # so (a make test run from a script's `&`): give kws screen the
                         # terminal's default, as Ctrl-C in a terminal has
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        with git.Repo(root) as r:
            if read_index(r).by_tree:
                break
        time.sleep(0.3)
    time.sleep(1.0)  # the next run is under way
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=180)
    assert p.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] and "stopped" in err
    finished = {r["task"] for r in doc["screened"]}
    stored = {r.task for rs in read_index(repo).by_tree.values() for r in rs}
    assert stored == finished and 1 <= len(stored) <= len(CHEAP) and "zz-hangs" not in stored
    # the hung candidate's processes end with the run
    assert wait_until(lambda: not marked_processes(marker)), marked_processes(marker)

    def left() -> list[psutil.Process]:
        return [q for q in psutil.process_iter(["cmdline"])
                if any("kws-screen-" in a for a in (q.info["cmdline"] or [])) and _alive(q.pid)]

    # nothing of the run survives 5 s after kws screen exits
    assert wait_until(lambda: not left()), left()
    # the next screen picks up what was not finished
    from workstation.screen.local import LocalPool

    pool = LocalPool(1)
    try:
        todo = {tp.task for tp in plan_screen(root, pool, ScreenOptions(only=("correctness",))).tasks}
    finally:
        pool.close()
    assert todo == (set(CHEAP) | {"zz-hangs"}) - stored
