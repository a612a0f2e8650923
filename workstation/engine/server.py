"""The review app's check server: the check engine in a process of its own.

The engine's parent side does real work (loading check modules, comparing outputs with
numpy, statistics on timings). Run in threads of the app's process it would hold the GIL
and the import lock while the reviewer types; run here, the app's process only reads
events. The app starts this server once (:class:`workstation.review.sources.RunnerCheckSource`)
as ``python -m workstation.engine.server`` in a session of its own, at a lower CPU
priority than the app (nice +10, ``KWS_CHECKSERVER_NICE``); the server keeps one :class:`~workstation.runner.Runner` (fork
server) for every run.

Protocol: the typed messages of :mod:`workstation.protocol.control`, one JSON object per
line. Requests on stdin: ``CheckRun`` (``run``, ``task_dir``, ``only``) and ``WarmUp``;
replies on stdout: ``Warm`` (``device`` or ``error``), and per run ``CheckEvent`` (``run``,
``kind``, ``data``) with the events of :func:`workstation.engine.events.normalise_event`,
ending with ``done`` or ``error``. A request line that does not decode is ignored. Runs
proceed concurrently (their child jobs share the runner's slots). End of stdin (the app
exited, or its SSH session dropped) closes the runner, killing any job still running,
and ends the server.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from workstation import settings
from workstation.protocol import control


class _Server:
    def __init__(self) -> None:
        self._out = threading.Lock()
        self._runner_lock = threading.Lock()
        self._runner: Any = None

    def send(self, msg: control.FromCheckServer) -> None:
        line = control.encode(msg)
        with self._out:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()

    def runner(self) -> Any:
        with self._runner_lock:
            if self._runner is None:
                from workstation.runner import Runner

                r = Runner()  # the device setting: the app sets KWS_DEVICE for its server
                r.start()
                self._runner = r
            return self._runner

    def warm(self) -> None:
        try:
            self.send(control.Warm(device=self.runner().device.label))
        except Exception as e:  # noqa: BLE001  (reported to the app)
            self.send(control.Warm(error=f"{type(e).__name__}: {e}"))

    def run(self, req: control.CheckRun) -> None:
        from workstation.engine.events import normalise_event

        rid = req.run

        def emit(kind: str, data: dict[str, Any]) -> None:
            k, d = normalise_event(kind, data)
            self.send(control.CheckEvent(run=rid, kind=k, data=d))

        try:
            from workstation.engine.run import run_checks
            from workstation.schema.problem import Problem
            from workstation.task.format import load_task

            try:
                task = load_task(req.task_dir)
            except Problem as e:
                self.send(control.CheckEvent(run=rid, kind="error", data={"message": str(e)}))
                return
            run_checks(task, self.runner(), only=req.only or None, on_event=emit, task_arg=req.task_dir)
        except Exception as e:  # noqa: BLE001  (the runner died, or kws has a bug: shown, never fatal)
            self.send(control.CheckEvent(run=rid, kind="error", data={"message": f"{type(e).__name__}: {e}"}))

    def serve(self) -> None:
        for line in sys.stdin:
            req = control.decode_to_check_server(line) if line.strip() else None
            if isinstance(req, control.CheckRun):
                threading.Thread(target=self.run, args=(req,), daemon=True).start()
            elif isinstance(req, control.WarmUp):
                threading.Thread(target=self.warm, daemon=True).start()
        with self._runner_lock:
            r, self._runner = self._runner, None
        if r is not None:
            r.close()


def _watch_parent(server: _Server, interval: float = 0.5) -> None:
    """End this process once the app that started it is gone (its pid is no longer our
    parent): close the runner (killing every job) and exit."""
    import time

    parent = os.getppid()
    while True:
        time.sleep(interval)
        if os.getppid() != parent:
            with server._runner_lock:
                r, server._runner = server._runner, None
            if r is not None:
                r.close()
            os._exit(0)


def main() -> None:
    nice = settings.current().checkserver_nice
    if nice:
        os.nice(nice)
    server = _Server()
    threading.Thread(target=_watch_parent, args=(server,), name="kws-parent-watch", daemon=True).start()
    server.serve()
    sys.stdout.flush()
    os._exit(0)  # daemon run threads may still be unwinding after the runner closed


if __name__ == "__main__":
    main()
