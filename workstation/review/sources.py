"""Check sources: what runs the battery on a task folder and streams its events to a review
session.

- :class:`RunnerCheckSource`: the real battery, in a check server process of its own
  (``python -m workstation.engine.server``); this process only reads its events. The first
  full run of a task whose version has a stored pre-screen (``kws screen``) replays that
  instead, at once; the next full run (re-run all) is a fresh one;
- :class:`ReplayCheckSource`: recorded event streams, for tests, snapshots and demos.

Events are the JSON-ready dicts of :func:`workstation.engine.events.normalise_event`.
Nothing here imports the engine, torch or triton.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from workstation import settings
from workstation.protocol import control

__all__ = ["CheckSource", "Emit", "ReplayCheckSource", "RunnerCheckSource", "sandbox_marker"]


def sandbox_marker() -> str:
    """What every screen of the app shows when task code runs unsandboxed ("" when it runs
    in bubblewrap): the check server reads the same setting
    (:func:`workstation.runner.policy.sandbox_mode`)."""
    from workstation.runner.policy import sandbox_mode
    from workstation.schema.problem import Problem

    try:
        mode = sandbox_mode()
    except Problem as e:
        return f"⚠ sandbox setting invalid: {e.problem}"
    return "⚠ SANDBOX OFF" if mode == "none" else ""

#: ``emit(kind, data)``: called for every event of a run.
Emit = Callable[[str, dict[str, Any]], None]


class CheckSource(Protocol):
    """Something that runs checks on a task folder and streams normalised events.

    ``run`` is called from a worker thread (never the UI thread); it calls ``emit`` for
    every event (``start``, ``check_started``, ``check_finished``, ``done``, or ``error``
    with ``{"message"}`` when the run could not happen) and returns the final report
    (None after an error). ``only`` restricts the run to those check ids.
    """

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class RunnerCheckSource:
    """The real battery, in a check server process of its own
    (:mod:`workstation.engine.server`: the engine and one fork-server
    :class:`~workstation.runner.Runner`), started on first use.

    The app's process only reads the server's events (a reader thread, blocked on a pipe),
    so the engine's own work (imports, numpy comparisons) never competes with the UI for
    the GIL, and this process imports neither torch nor triton nor the engine. Task code
    runs in the runner's niced child processes. :meth:`close` ends the server's stdin and
    returns at once; the server closes the runner (killing jobs) on its own.

    With ``prescreen`` (the default), the first full run of a task (no ``only``) whose
    version in ``HEAD`` has a stored pre-screen of this kws version, with a clean work tree,
    replays it (:func:`workstation.screen.summary.stored_run`) instead of running: the
    ``start`` event carries ``prescreen`` (when, where, how) and the report its ``screen``
    key. Later full runs of that task version run the battery.
    """

    def __init__(self, device: str | None = None, *, prescreen: bool = True) -> None:
        self._device = device
        self.prescreen = prescreen
        self._served: set[tuple[str, str]] = set()
        self._proc: Any = None
        self._lock = threading.Lock()
        self._runs: dict[int, tuple[Emit, threading.Event, list[Any]]] = {}
        self._next = 0
        self._closed = False
        self._warm = threading.Event()
        self._warm_reply: control.Warm | None = None
        self._log: Path | None = None

    def _ensure(self) -> Any:
        import subprocess
        import sys
        import tempfile

        with self._lock:
            if self._closed:
                raise RuntimeError("the check runner is closed")
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            env = dict(os.environ)
            if self._device:  # the app's --device over the device setting, in its server only
                env[settings.BY_NAME["device"].env] = self._device
            fd, log = tempfile.mkstemp(prefix="kws-checkserver-", suffix=".log")
            self._log = Path(log)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "workstation.engine.server"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, env=env, text=True,
                bufsize=1, start_new_session=True,  # a dropped SSH session's SIGHUP spares it: it cleans up
            )
            os.close(fd)
            threading.Thread(target=self._read, args=(self._proc,), name="kws-checkserver-reader",
                             daemon=True).start()
            return self._proc

    def _send(self, msg: control.ToCheckServer) -> None:
        proc = self._ensure()
        with self._lock:
            assert proc.stdin is not None
            proc.stdin.write(control.encode(msg).decode())
            proc.stdin.flush()

    def _read(self, proc: Any) -> None:
        """(The reader thread.) Hand each check event of the server's output to its run
        (``done`` and ``error`` end it) and a warm-up's reply to :meth:`warm_up`; at the end
        of the output, :meth:`_server_gone`."""
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = control.decode_from_check_server(line) if line.strip() else None
            if isinstance(msg, control.Warm):
                self._warm_reply = msg
                self._warm.set()
                continue
            if not isinstance(msg, control.CheckEvent):
                continue
            with self._lock:
                entry = self._runs.get(msg.run)
            if entry is None:
                continue
            emit, done, result = entry
            kind, data = msg.kind, msg.data
            emit(kind, data)
            if kind in ("done", "error"):
                result.append(data.get("report") if kind == "done" else None)
                done.set()
        self._server_gone()

    def _server_gone(self) -> None:
        """The check server's output ended: every run still waiting ends with an ``error``
        event (the end of the server's log in its message), and so does a warm-up."""
        tail = ""
        if self._log is not None:
            try:
                tail = self._log.read_text(errors="replace")[-1500:]
            except OSError:
                pass
        with self._lock:
            pending = list(self._runs.values())
        for emit, done, result in pending:
            if not done.is_set():
                emit("error", {"message": "the kws check server exited" + (f": {tail}" if tail else "")})
                result.append(None)
                done.set()
        if self._warm_reply is None:
            self._warm_reply = control.Warm(error="the kws check server exited")
        self._warm.set()

    def warm_up(self) -> str:
        """Start the server and its fork server now (blocking; call from a worker).
        Returns the device label. Raises RuntimeError when it could not start."""
        self._send(control.WarmUp())
        self._warm.wait(300)
        reply = self._warm_reply
        if reply is not None and reply.error:
            raise RuntimeError(reply.error)
        return reply.device if reply is not None else ""

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None:
        if self.prescreen and not only:
            replayed = self._replay(Path(task_dir), emit)
            if replayed is not None:
                return replayed
        done = threading.Event()
        result: list[Any] = []
        with self._lock:
            self._next += 1
            rid = self._next
            self._runs[rid] = (emit, done, result)
        try:
            self._send(control.CheckRun(run=rid, task_dir=str(task_dir), only=list(only) if only else None))
            done.wait()
        except (OSError, RuntimeError) as e:
            emit("error", {"message": f"the kws check server is not available: {e}"})
            return None
        finally:
            with self._lock:
                self._runs.pop(rid, None)
        return result[0] if result else None

    def _replay(self, task_dir: Path, emit: Emit) -> dict[str, Any] | None:
        from workstation.screen.summary import stored_run

        got = stored_run(task_dir.parent.parent, task_dir.name)
        if got is None:
            return None
        key = (str(task_dir), got.tree)
        with self._lock:
            if key in self._served:
                return None
            self._served.add(key)
        for kind, data in got.events:
            emit(kind, json.loads(json.dumps(data)))
        return got.report

    def close(self) -> None:
        """End the server's stdin and release every caller still waiting on it (a warm-up or
        a run in a worker thread) at once, so quitting never waits for a server that is
        still importing (the server exits by itself when it reads the end of its input)."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
            pending = list(self._runs.values())
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()  # the server closes its runner and exits by itself
            except OSError:
                pass
        for _emit, done, result in pending:
            if not done.is_set():
                result.append(None)
                done.set()
        if not self._warm.is_set():
            self._warm_reply = control.Warm(error="the check runner is closed")
            self._warm.set()


class ReplayCheckSource:
    """Replays recorded event streams (``tests/fixtures/events/<task>.json``: ``{"task",
    "events": [[kind, data], ...]}``), for deterministic tests, snapshots and demos.

    ``delay_s`` sleeps before each event; ``gate``, when given, is waited on (at most 30 s;
    :meth:`close` ends the wait and the replay) before the first ``check_finished`` (so a test can look at the screen while checks "run"), or,
    with ``gate_before``, before the result of that check (the checks before it have
    reported).
    With ``only``, only those checks' events are replayed and the final report holds
    only them.
    """

    def __init__(self, streams: Mapping[str, Mapping[str, Any]] | Path | str, *, delay_s: float = 0.0,
                 gate: threading.Event | None = None, gate_before: str | None = None) -> None:
        if isinstance(streams, str | Path):
            folder = Path(streams)
            streams = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}
        self.streams = dict(streams)
        self.delay_s = delay_s
        self.gate = gate
        self.gate_before = gate_before
        self.runs: list[tuple[str, tuple[str, ...] | None]] = []
        self._closed = threading.Event()

    def run(self, task_dir: Path, only: Sequence[str] | None, emit: Emit) -> dict[str, Any] | None:
        task_id = Path(task_dir).name
        self.runs.append((task_id, tuple(only) if only else None))
        stream = self.streams.get(task_id)
        if stream is None:
            emit("error", {"message": f"no recorded check run for {task_id}"})
            return None
        keep = set(only) if only else None
        report: dict[str, Any] | None = None
        gated = False
        for kind, data in stream["events"]:
            if self.delay_s:
                time.sleep(self.delay_s)
            if keep is not None:
                data = _kept_event(kind, data, keep)
                if data is None:
                    continue
            if kind == "check_finished":
                if self.gate is not None and not gated and self.gate_before in (None, data["result"]["check"]):
                    if not self._wait_gate(self.gate):
                        return None
                    gated = True
            elif kind == "done":
                report = _kept_report(data["report"], keep)
                data = {"report": report}
            emit(kind, json.loads(json.dumps(data)))
        return report

    def _wait_gate(self, gate: threading.Event) -> bool:
        """Wait (up to 30 s) for the test to open ``gate``; False when the app closed
        meanwhile (nobody reads the rest of the run)."""
        end = time.monotonic() + 30
        while not gate.wait(0.05) and time.monotonic() < end:
            if self._closed.is_set():
                return False
        return True

    def close(self) -> None:
        """Ends a replay waiting on its gate (the app's shutdown does not wait 30 s for it)."""
        self._closed.set()


def _kept_event(kind: str, data: dict[str, Any], keep: set[str]) -> dict[str, Any] | None:
    """Event ``data`` as a run of only the checks ``keep`` sends it: ``start`` names only
    them; another check's ``check_started`` or ``check_finished`` is not sent (None)."""
    if kind == "start":
        return {**data, "checks": [c for c in data["checks"] if c in keep]}
    if kind == "check_started" and data["check"] not in keep:
        return None
    if kind == "check_finished" and data["result"]["check"] not in keep:
        return None
    return data


def _kept_report(report: Mapping[str, Any], keep: set[str] | None) -> dict[str, Any]:
    """A copy of the recorded ``report``; with ``keep``, of the checks in it only (their
    findings, and ``complete`` anew)."""
    out = dict(report)
    if keep is not None:
        out["checks"] = [c for c in out["checks"] if c["check"] in keep]
        out["findings"] = [f for f in out["findings"] if f["check"] in keep]
        nj = {n.get("check") for n in out.get("not_judged") or []}
        out["complete"] = all(c["status"] != "error" and c["check"] not in nj for c in out["checks"])
    return out
