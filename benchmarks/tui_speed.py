"""How fast the review app responds (prints figures; not a timed test).

Targets (keyboard-driven workstation issue, "Speed"):

- the queue shows within 1.0 s of launch on the sample queue, 2.0 s on 5,000 tasks;
- opening a task paints within 150 ms (checks then stream in);
- a keystroke in the rubric is handled within 50 ms while checks run;
- a commit shows "committed" within 1 s (issue "the reviewer's day, round two").

Measured:

1. **launch -> queue**, in a fresh process (Python start-up and imports included): the
   app runs headless and records the wall time of the first frame that shows task rows
   (``App.post_display_hook``). Sample queue, and a generated queue of 5,000 tasks with a
   cold index cache (first open) and a warm one (every later open). With ``--tmux``, also
   the real ``kws`` in a tmux pane, until ``capture-pane`` shows the first task id.
2. **open -> paint**: from the Enter key to the first frame of the review screen that
   shows the task's spec and diff, with the real check engine starting in the background;
   then the time until the first check result arrives.
3. **keystroke while checks run**: rubric value keys sent while the real battery runs,
   from the key to the first frame that shows the new value (median, p95, max).

While it measures, a battery runs beside the app (``--beside N`` loops of ``kws check`` on
sample tasks, default 1; ``--beside 0`` for a quiet machine), as it does while a reviewer
works. The two figures the review workstation issue tracks, **first paint** (1: launch ->
queue, sample queue) and **task open** (2: Enter -> review screen painted), are measured
``--repeat`` times each in fresh processes (median reported) and compared with the
recorded baseline ``benchmarks/tui_speed_baseline.json`` (``--record-baseline`` writes it:
it was recorded on this project's machine before the speed work of that issue, same
script, same battery beside).

Usage: ``.venv/bin/python benchmarks/tui_speed.py [--tasks 5000] [--keys 40] [--tmux]
[--repeat 5] [--beside 1] [--record-baseline] [--compare REV]``. On a machine shared with
other work the load moves both figures by a factor of two or more from hour to hour;
``--compare REV`` measures revision ``REV`` (the baseline's commit) in alternation with
this checkout under the same load and prints that ratio too. Everything runs in a
temporary folder with its own KWS_* folders and git identity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BASELINE = Path(__file__).with_name("tui_speed_baseline.json")
#: sample tasks the battery beside the app loops over
BESIDE_TASKS = ("rowsum-edge", "softmax-gen", "matmul-opt", "layernorm-debug")

CHILD = textwrap.dedent("""
    import asyncio, json, sys, time
    T0 = time.time()
    sys.path.insert(0, {repo!r})
    from workstation.tui.app import KwsApp

    class Timed(KwsApp):
        first_rows = None
        def post_display_hook(self):
            if self.first_rows is None and self.queue.loaded and self.queue.rows:
                try:
                    if self.screen.query_one("QueueTable").rows:
                        self.first_rows = time.time()
                except Exception:
                    pass

    async def main():
        app = Timed({queue!r}, warm_runner=False)
        async with app.run_test(size=(160, 48)) as pilot:
            while app.first_rows is None:
                await pilot.pause(0.01)
            while {wait_validated!r} and app.queue.validating:  # let pass 2 write the index cache
                await pilot.pause(0.1)
            print(json.dumps({{"import_s": None, "first_rows": app.first_rows,
                              "rows": len(app.queue.rows), "child_start": T0}}))

    asyncio.run(main())
""")


OPEN_CHILD = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path.insert(0, {repo!r})
    from textual import events
    from workstation.tui.app import KwsApp

    frames = []

    class Timed(KwsApp):
        def post_display_hook(self):
            if getattr(self.screen, "files_ready", False) and getattr(self.screen, "task_id", None) == {task!r}:
                frames.append(time.perf_counter())

    async def main():
        app = Timed({queue!r}, warm_runner=False)
        async with app.run_test(size=(160, 48)) as pilot:
            while not app.queue.loaded or app.queue.validating:
                await pilot.pause(0.05)
            # the fork server is up first, as it is while the reviewer reads the queue
            await asyncio.to_thread(app.check_source.warm_up)
            table = app.screen.query_one("QueueTable")
            table.cursor = next(i for i, r in enumerate(table.rows) if r.id == {task!r})
            await pilot.pause(0.3)
            t0 = time.perf_counter()
            ev = events.Key("enter", None)
            ev.set_sender(app)
            app._driver.send_message(ev)
            while not frames:
                await asyncio.sleep(0.001)
            print(json.dumps({{"open_paint_ms": 1000 * (frames[0] - t0)}}))

    asyncio.run(main())
""")


def env_for(tmp: Path) -> dict[str, str]:
    e = dict(os.environ)
    e.update(KWS_DATA_DIR=str(tmp / "data"), KWS_STATE_DIR=str(tmp / "state"),
             KWS_CONFIG_DIR=str(tmp / "config"), KWS_CACHE_DIR=str(tmp / "cache"),
             GIT_AUTHOR_NAME="Bench Reviewer", GIT_AUTHOR_EMAIL="bench@example.com",
             GIT_COMMITTER_NAME="Bench Reviewer", GIT_COMMITTER_EMAIL="bench@example.com",
             GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"))
    e.pop("COLUMNS", None)
    e.pop("LINES", None)
    (tmp / "gitconfig").write_text("")
    return e


def make_sample_queue(tmp: Path, env: dict[str, str]) -> Path:
    code = ("from workstation.repo.gitqueue import ensure_default_queue; "
            f"print(ensure_default_queue(source={str(REPO / 'sample_queue')!r}, dest={str(tmp / 'sample')!r}))")
    subprocess.run([PY, "-c", code], env=env, check=True, cwd=REPO, capture_output=True)
    return tmp / "sample"


def make_big_queue(tmp: Path, n: int, env: dict[str, str]) -> Path:
    """``n`` tasks: copies of sample_queue/tasks/softmax-gen with their own ids, one git
    commit."""
    src = REPO / "sample_queue" / "tasks" / "softmax-gen"
    root = tmp / f"queue{n}"
    (root / "tasks").mkdir(parents=True)
    (root / "queue.toml").write_text(f'name = "generated {n}"\nrubric = "kernel-review"\n')
    toml = (src / "task.toml").read_text()
    files = [p for p in src.iterdir() if p.is_file() and p.name != "task.toml"]
    for i in range(n):
        tid = f"gen-{i:05d}"
        d = root / "tasks" / tid
        d.mkdir()
        for p in files:
            shutil.copyfile(p, d / p.name)
        (d / "task.toml").write_text(toml.replace('id = "softmax-gen"', f'id = "{tid}"'))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "generated"], cwd=root, env=env, check=True)
    return root


def launch_to_queue(queue: Path, env: dict[str, str], wait_validated: bool = False,
                    repo: Path = REPO) -> tuple[float, int]:
    """Seconds from spawning a fresh Python process to the first frame showing rows
    (with ``wait_validated`` the process then stays until every task is validated, so
    the index cache is written for the next launch)."""
    script = Path(tempfile.mkdtemp()) / "child.py"
    script.write_text(CHILD.format(repo=str(repo), queue=str(queue), wait_validated=wait_validated))
    t0 = time.time()
    out = subprocess.run([PY, str(script)], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return doc["first_rows"] - t0, doc["rows"]


def open_to_paint(queue: Path, task: str, env: dict[str, str], repo: Path = REPO) -> float:
    """Milliseconds from Enter on ``task`` to the first frame of its review screen with
    spec and diff, in a fresh process (the real engine warmed up first)."""
    script = Path(tempfile.mkdtemp()) / "open_child.py"
    script.write_text(OPEN_CHILD.format(repo=str(repo), queue=str(queue), task=task))
    out = subprocess.run([PY, str(script)], env=env, cwd=repo, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])["open_paint_ms"]


class Beside:
    """``n`` loops of ``kws check`` on sample tasks, running beside the measurements."""

    def __init__(self, n: int, env: dict[str, str]) -> None:
        self.n, self.env = n, env
        self.stop = threading.Event()
        self.procs: list[subprocess.Popen] = []
        self.runs = 0
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]

    def _loop(self, i: int) -> None:
        kws = Path(PY).parent / "kws"
        k = i
        while not self.stop.is_set():
            task = REPO / "sample_queue" / "tasks" / BESIDE_TASKS[k % len(BESIDE_TASKS)]
            p = subprocess.Popen([str(kws), "check", str(task)], env=self.env, cwd=REPO,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self.procs.append(p)
            p.wait()
            self.runs += 1
            k += 1

    def __enter__(self) -> Beside:
        for t in self.threads:
            t.start()
        if self.n:
            time.sleep(3.0)  # let the battery get going
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        self.stop.set()
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for t in self.threads:
            t.join(timeout=30)


def tmux_launch(queue: Path, env: dict[str, str], needle: str) -> float | None:
    """Seconds from starting ``kws`` in a tmux pane until the pane shows ``needle``."""
    if shutil.which("tmux") is None:
        return None
    sock = f"kws-bench-{os.getpid()}-{time.monotonic_ns()}"
    keep = {k: v for k, v in env.items() if k.startswith(("KWS_", "GIT_", "PATH", "HOME", "LANG"))}
    keep["TERM"] = "xterm-256color"
    assigns = " ".join(f"{k}={subprocess.list2cmdline([v])}" for k, v in keep.items())
    cmd = f"env -i {assigns} {Path(PY).parent / 'kws'} --queue {queue}"
    t0 = time.time()
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "b", "-x", "160", "-y", "48", cmd], check=True)
    try:
        while time.time() - t0 < 60:
            s = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", "b"], capture_output=True,
                               text=True).stdout
            if needle in s:
                return time.time() - t0
            time.sleep(0.01)
        return None
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


async def _waited(since: float, what: str, limit: float = 60.0, step: float = 0.0005) -> None:
    """One short sleep of a wait loop that began at ``since`` (``time.perf_counter``):
    a RuntimeError naming ``what`` after ``limit`` seconds, so that a key the app no
    longer binds fails the benchmark instead of hanging it."""
    if time.perf_counter() - since > limit:
        raise RuntimeError(f"benchmark: gave up after {limit:.0f} s waiting for {what}")
    await asyncio.sleep(step)


async def open_and_type(queue: Path, task: str, n_keys: int) -> dict[str, object]:
    """Open ``task`` with the real engine, time the paint, then type rubric keys while
    the checks run."""
    from textual import events

    from workstation.tui.app import KwsApp

    frames: list[float] = []
    review_frames: list[float] = []  # frames that showed a review screen with its spec and diff

    class Timed(KwsApp):
        def post_display_hook(self) -> None:
            now = time.perf_counter()
            frames.append(now)
            if getattr(self.screen, "files_ready", False):
                review_frames.append(now)

    app = Timed(queue)
    res: dict[str, object] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        while not app.queue.loaded:
            await pilot.pause(0.05)
        # let the fork server come up first, as it does while the reviewer reads the queue
        await asyncio.to_thread(app.check_source.warm_up)
        table = app.screen.query_one("QueueTable")
        table.cursor = next(i for i, r in enumerate(table.rows) if r.id == task)
        await pilot.pause(0.2)
        t0 = time.perf_counter()
        ev = events.Key("enter", None)
        ev.set_sender(app)
        app._driver.send_message(ev)
        while not review_frames:
            await _waited(t0, "the review screen's first frame with spec and diff")
        res["open_paint_ms"] = 1000 * (review_frames[0] - t0)
        s = app.screen.session
        while not any(r.done for r in s.rows.values()) and not s.error:
            await _waited(t0, "the first check result", limit=600)
        res["first_check_s"] = time.perf_counter() - t0
        # rubric keystrokes while the battery runs: alt+5 shows the rubric panel, then the
        # reference field's values by number (3 legitimate, 2 questionable; a pick moves the
        # cursor on, so it goes back to the first field each time)
        ev = events.Key("alt+5", None)
        ev.set_sender(app)
        app._driver.send_message(ev)
        await pilot.pause(0.2)
        form = app.screen.query_one("RubricForm")
        fields = [f.key for f in s.rubric.choice_fields]
        values = [v.value for v in s.rubric.choice_fields[fields.index("reference")].values]
        lat = []
        running_during = 0
        for i in range(n_keys):
            form.cursor = fields.index("reference")
            want = "legitimate" if i % 2 == 0 else "questionable"
            key = str(values.index(want) + 1)
            running_during += s.running
            n0 = len(frames)
            t0 = time.perf_counter()
            ev = events.Key(key, key)
            ev.set_sender(app)
            app._driver.send_message(ev)
            while s.values.get("reference") != want:
                await _waited(t0, f"rubric key {key!r} to set reference = {want}")
            changed = time.perf_counter()
            while len(frames) == n0 or frames[-1] < changed:
                await _waited(t0, "a frame after the rubric key")
            lat.append(1000 * (frames[-1] - t0))
            await asyncio.sleep(0.05)
        res["key_ms"] = lat
        res["keys_while_running"] = running_during
        t1 = time.perf_counter()
        while s.running or (s.run_seconds is None and not s.error):  # every row done, then "done"
            await _waited(t1, "the battery to finish", limit=900, step=0.2)
        res["run_s"] = s.run_seconds
        # commit: every field filled (kws's suggestions, the best value elsewhere, a
        # rationale), then ctrl+s (and Enter on the confirmation, when the report is not
        # final) to the status line saying the verdict is committed
        for f in s.rubric.choice_fields:
            if not s.values.get(f.key):
                s.set_value(f.key, f.values[-1].value)
        s.set_rationale("timed commit")
        status = app.screen.query_one("#rubric-status")
        t0 = time.perf_counter()
        ev = events.Key("ctrl+s", None)
        ev.set_sender(app)
        app._driver.send_message(ev)
        confirmed = False
        while "committed verdict" not in str(getattr(status, "renderable", "") or getattr(status, "content", "")):
            if not confirmed and type(app.screen).__name__ == "ConfirmScreen":
                confirmed = True
                ev = events.Key("enter", None)
                ev.set_sender(app)
                app._driver.send_message(ev)
            if time.perf_counter() - t0 > 60:
                break
            await asyncio.sleep(0.001)
        res["commit_ms"] = 1000 * (time.perf_counter() - t0)
        res["commit_confirmed"] = confirmed
    return res


def checkout(rev: str, dest: Path) -> Path:
    """The files of git revision ``rev`` of this repository, at ``dest``, byte-compiled."""
    dest.mkdir(parents=True)
    arch = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "x", "-C", str(dest)], input=arch, check=True)
    compile_tree(dest)
    return dest


def compile_tree(repo: Path) -> None:
    """Byte-compile ``repo/workstation`` (as an installed kws is): with PYTHONDONTWRITEBYTECODE
    set, a tree without ``__pycache__`` would pay for compiling every module at each start,
    and two trees compared would differ in that alone."""
    subprocess.run([PY, "-m", "compileall", "-q", str(repo / "workstation")], check=True, capture_output=True)


def ab_compare(args: argparse.Namespace, tmp: Path, sample: Path, env: dict[str, str]) -> None:
    """First paint and task open of revision ``args.compare`` and of this checkout, run in
    alternation (A B, B A, ...) with the battery still running beside, so that machine
    load lands on both alike; prints each median and the ratio."""
    base = checkout(args.compare, tmp / "compare")
    paints: dict[str, list[float]] = {"then": [], "now": []}
    opens: dict[str, list[float]] = {"then": [], "now": []}
    for i in range(args.repeat):
        order = [("then", base), ("now", REPO)] if i % 2 == 0 else [("now", REPO), ("then", base)]
        for name, repo in order:
            paints[name].append(launch_to_queue(sample, env, repo=repo)[0])
        for name, repo in order:
            opens[name].append(open_to_paint(sample, args.task, env, repo=repo))
    p0, p1 = statistics.median(paints["then"]), statistics.median(paints["now"])
    o0, o1 = statistics.median(opens["then"]), statistics.median(opens["now"])
    print(f"A/B, interleaved, {args.repeat} runs each, load average {os.getloadavg()[0]:.1f}:")
    print(f"  first paint: {args.compare} {p0:.3f} s, this checkout {p1:.3f} s: ratio {p1 / p0:.2f}, "
          f"{100 * (1 - p1 / p0):.0f}% faster   (runs then {[round(x, 3) for x in paints['then']]}, "
          f"now {[round(x, 3) for x in paints['now']]})")
    print(f"  task open:   {args.compare} {o0:.1f} ms, this checkout {o1:.1f} ms: ratio {o1 / o0:.2f}, "
          f"{100 * (1 - o1 / o0):.0f}% faster   (runs then {[round(x) for x in opens['then']]}, "
          f"now {[round(x) for x in opens['now']]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=5000, help="size of the generated queue (0: skip)")
    ap.add_argument("--keys", type=int, default=40, help="rubric keystrokes to time (0: skip)")
    ap.add_argument("--task", default="relu-unwritten", help="sample task to open")
    ap.add_argument("--tmux", action="store_true", help="also time the real kws in a tmux pane")
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per tracked figure")
    ap.add_argument("--beside", type=int, default=1, help="battery loops (kws check) beside the app")
    ap.add_argument("--record-baseline", action="store_true", help=f"write the figures to {BASELINE.name}")
    ap.add_argument("--compare", metavar="REV", default=None,
                    help="also measure the code of git revision REV (e.g. the baseline's commit), interleaved "
                         "with this checkout's runs, so both see the same machine load; prints both medians")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kws-bench-"))
    env = env_for(tmp)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("KWS_", "GIT_"))})
    try:
        compile_tree(REPO)
        sample = make_sample_queue(tmp, env)
        with Beside(args.beside, env) as beside:
            print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
                  f"{args.beside} battery loop(s) beside the app")
            paints = []
            for i in range(args.repeat):
                secs, n = launch_to_queue(sample, env)
                paints.append(secs)
                print(f"launch -> queue shown, sample queue ({n} tasks), run {i + 1}: {secs:.3f} s   (target 1.0 s)")
            opens = []
            for i in range(args.repeat):
                ms = open_to_paint(sample, args.task, env)
                opens.append(ms)
                print(f"open {args.task} -> review screen painted with spec and diff, run {i + 1}: {ms:.1f} ms   "
                      f"(target 150 ms)")
            load = os.getloadavg()[0]
            figures = {"first_paint_s": statistics.median(paints), "task_open_ms": statistics.median(opens)}
            print(f"FIRST PAINT (median of {len(paints)}): {figures['first_paint_s']:.3f} s; "
                  f"TASK OPEN (median of {len(opens)}): {figures['task_open_ms']:.1f} ms; "
                  f"load average {load:.1f}, {beside.runs} battery run(s) finished beside")
            if args.tasks:
                t = time.time()
                big = make_big_queue(tmp, args.tasks, env)
                print(f"(generated {args.tasks} tasks and committed them in {time.time() - t:.1f} s)")
                secs, n = launch_to_queue(big, env, wait_validated=True)
                print(f"launch -> queue shown, {n} tasks, cold index cache: {secs:.3f} s   (target 2.0 s)")
                secs2, n = launch_to_queue(big, env)
                print(f"launch -> queue shown, {n} tasks, warm index cache: {secs2:.3f} s   (target 2.0 s)")
            if args.tmux:
                r = tmux_launch(sample, env, "bench-biased")
                print(f"tmux: kws launch -> first task row on screen, sample queue: {r:.3f} s" if r else "tmux: n/a")
                if args.tasks:
                    r = tmux_launch(big, env, "gen-00000")
                    print(f"tmux: kws launch -> first task row on screen, {args.tasks} tasks: {r:.3f} s"
                          if r else "tmux: n/a")
            if args.keys:
                res = asyncio.run(open_and_type(sample, args.task, args.keys))
                print(f"open {args.task} in the timed app -> painted: {res['open_paint_ms']:.1f} ms; "
                      f"first check result after {res['first_check_s']:.2f} s")
                lat = sorted(res["key_ms"])
                p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
                print(f"rubric keystroke -> new value on screen while checks run ({res['keys_while_running']} of "
                      f"{len(lat)} keys during the run): median {statistics.median(lat):.1f} ms, p95 {p95:.1f} ms, "
                      f"max {lat[-1]:.1f} ms   (target 50 ms)")
                print(f"(the battery took {res['run_s'] or 0:.1f} s on this machine)")
                print(f"commit (ctrl+s{' + Enter on the confirmation' if res['commit_confirmed'] else ''}) -> "
                      f"'committed' on screen: {res['commit_ms']:.0f} ms   (target 1000 ms)")
        if args.compare:
            ab_compare(args, tmp, sample, env)
        if args.record_baseline:
            import datetime

            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                 text=True).stdout.strip()
            doc = {**figures, "first_paint_runs_s": paints, "task_open_runs_ms": opens,
                   "repeat": args.repeat, "beside": args.beside, "task": args.task, "cpus": os.cpu_count(),
                   "load_average": round(load, 2), "commit": rev,
                   "recorded": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")}
            BASELINE.write_text(json.dumps(doc, indent=1) + "\n")
            print(f"baseline written to {BASELINE}")
        elif BASELINE.is_file():
            base = json.loads(BASELINE.read_text())
            for key, unit in (("first_paint_s", "s"), ("task_open_ms", "ms")):
                now, then = figures[key], base[key]
                print(f"{key}: {now:.3f} {unit} now vs {then:.3f} {unit} baseline (commit {base.get('commit')}): "
                      f"ratio {now / then:.2f}, {100 * (1 - now / then):.0f}% faster")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
