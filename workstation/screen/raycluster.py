"""The Ray backend: runs spread over a Ray cluster's nodes (``kws screen --ray ADDRESS|auto``).

Ray is an optional extra (``pip install 'kws[ray]'``), imported only when this backend is
made. Every node needs kws (the same version), torch, triton and bubblewrap installed in
the Python that Ray's workers use (docs/screen.md). What Ray does and does not do, and how
this backend deals with it:

- **One run, one Ray task.** A Ray task calls :func:`workstation.screen.worker.run_spec`,
  which runs ``kws check`` under the supervisor on that node; each task asks for
  ``cpus_per_task`` CPUs and ``gpus_per_task`` GPUs (Ray sets ``CUDA_VISIBLE_DEVICES``).
- **Timing runs alone on a node.** A timing run is pinned to one node (a hard
  ``NodeAffinitySchedulingStrategy``) and asks for *all* of that node's CPUs, so no other
  kws run (each asks for at least one CPU) shares the node while it runs.
- **No per-call timeout in Ray** (ray-project/ray#18916): each run reports its start to a
  small tracker actor; a run still going ``timeout`` + 30 s after it started is ended with
  ``ray.cancel(force=True)`` (which kills the worker; the supervisor, told by its parent-death
  signal, kills the ``kws check`` tree) and comes back as ``timeout``; the supervisor's own
  limit normally ends it first.
- **Retry once on node death.** Ordinary runs have ``max_retries=1`` (Ray resubmits a task
  whose worker or node died; a force-cancelled task is not retried); a pinned timing run
  whose node died is resubmitted once by this backend to another node. A run lost twice
  comes back as ``lost`` and is not stored.
- **Requests that cannot be scheduled.** A request no node can satisfy stays pending
  forever (e.g. ``num_gpus=1`` on a cluster without GPUs). When runs are pending, none is
  running and nothing started or finished for ``schedule_timeout`` seconds, :meth:`poll`
  raises :class:`~workstation.screen.run.SchedulingError` naming the request and the
  cluster's resources; a request no node can satisfy at all is warned about at once.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workstation.screen.keys import NodeEnv, probe_env
from workstation.screen.run import SchedulingError
from workstation.screen.worker import GRACE_S, RunOutcome, RunSpec, run_spec

__all__ = ["RayBackend", "RayUnavailable"]


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached; the message says what to do."""


def _where() -> tuple[str, str]:
    import ray

    node = ray.get_runtime_context().get_node_id()
    try:
        ip = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001  (only a label)
        ip = ""
    return node, f"{socket.gethostname()} ({ip})" if ip else socket.gethostname()


def remote_run(spec: RunSpec, tracker: Any) -> RunOutcome:
    """The body of a Ray task: announce the start, run ``spec`` on this node."""
    node, host = _where()
    tracker.started.remote(spec.job, host)
    return run_spec(spec, node=node, host=host)


def remote_probe(modules: list[str], device: str | None) -> NodeEnv:
    """The body of a probe task: this node's environment."""
    node, host = _where()
    return probe_env(modules, device, node=node, host=host)


class Tracker:
    """A tiny actor on the driver's node: runs report their start here; the driver drains."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, float]] = []

    def started(self, job: str, host: str) -> None:
        self._events.append((job, host, time.time()))

    def drain(self) -> list[tuple[str, str, float]]:
        out, self._events = self._events, []
        return out


@dataclass
class _Job:
    spec: RunSpec
    submitted: float
    attempt: int = 1
    node: str = ""
    started_at: float = 0.0
    starts: int = 0
    host: str = ""
    cancelled: bool = False


class RayBackend:
    """Runs on the Ray cluster at ``address`` (``"auto"``: the cluster this machine belongs
    to). ``workers``: the most runs in flight (default: as many as the cluster's CPUs
    allow); ``node_ip``: this machine's address in the cluster, when Ray should not guess it;
    ``grace_s``: seconds past a run's own limit before it is force-cancelled.

    Raises:
        RayUnavailable: Ray is not installed or the cluster does not answer.
    """

    name = "ray"

    def __init__(self, address: str, *, workers: int | None = None, gpus_per_task: float = 0.0,
                 cpus_per_task: float = 1.0, schedule_timeout: float = 300.0,
                 node_ip: str | None = None, warn: Any = None, grace_s: float = GRACE_S) -> None:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError as e:
            raise RayUnavailable("kws screen --ray needs Ray on this machine and every node: "
                                 "pip install 'kws[ray]'") from e
        self.ray = ray
        self._affinity = NodeAffinitySchedulingStrategy
        self.address = address
        self.gpus = float(gpus_per_task)
        self.cpus = max(1.0, float(cpus_per_task))
        self.schedule_timeout = float(schedule_timeout)
        self.grace_s = float(grace_s)
        self._warn = warn or (lambda msg: None)
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
                     logging_level=logging.ERROR, _node_ip_address=node_ip)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as e:
            raise RayUnavailable(f"cannot connect to the Ray cluster at {address!r}: {e}. Start one "
                                 "(ray start --head) or name its address (host:6379); with "
                                 "RAY_AUTH_MODE=token set the same token on this machine") from e
        self._run = ray.remote(remote_run)
        self._probe = ray.remote(remote_probe)
        self._tracker = self._new_tracker()
        self.workers = int(workers) if workers else max(1, int(self._total("CPU") // self.cpus))
        self._inflight: dict[Any, _Job] = {}
        self._waiting: deque[RunSpec] = deque()
        self._timing_rr = 0
        self._last_progress = time.monotonic()
        if self.gpus and not self._nodes():
            self._warn(f"no node of the cluster has {self.gpus:g} GPU(s) and {self.cpus:g} CPU(s) free "
                       f"to give now ({self._resources()}); waiting up to {self.schedule_timeout:g} s "
                       "for one (an autoscaler may add it)")

    # -- cluster state ----------------------------------------------------------------------------

    def _alive(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def _nodes(self) -> list[dict[str, Any]]:
        """Alive nodes that can run one kws run (enough CPUs and GPUs in total)."""
        return [n for n in self._alive()
                if n["Resources"].get("CPU", 0) >= self.cpus and n["Resources"].get("GPU", 0) >= self.gpus]

    def _total(self, res: str) -> float:
        return sum(n["Resources"].get(res, 0.0) for n in self._nodes())

    def _resources(self) -> str:
        parts = []
        for n in self._alive():
            r = n["Resources"]
            parts.append(f"{n['NodeManagerAddress']}: {r.get('CPU', 0):g} CPU, {r.get('GPU', 0):g} GPU")
        return "; ".join(parts) or "no alive node"

    def describe(self) -> str:
        nodes = self._alive()
        return (f"Ray cluster at {self.address}: {len(nodes)} node(s) ({self._resources()}); "
                f"{self.cpus:g} CPU and {self.gpus:g} GPU per run, up to {self.workers} at once")

    # -- the backend interface (workstation.screen.run.Backend) -------------------------------------

    def envs(self, modules: Iterable[str], device: str | None) -> list[NodeEnv]:
        """Each node's environment (one probe task per node that can run kws, in parallel;
        a node whose probe does not finish within the schedule timeout is left out)."""
        mods = sorted(set(modules))
        refs = [self._probe.options(num_cpus=self.cpus, num_gpus=self.gpus,
                                    scheduling_strategy=self._affinity(n["NodeID"], soft=False)).remote(mods, device)
                for n in self._nodes()]
        envs: list[NodeEnv] = []
        if not refs:
            return envs
        ready, rest = self.ray.wait(refs, num_returns=len(refs), timeout=self.schedule_timeout)
        for r in rest:
            self.ray.cancel(r, force=True)
        for r in ready:
            try:
                envs.append(self.ray.get(r))
            except self.ray.exceptions.RayError as e:
                self._warn(f"a node's environment probe failed: {str(e).splitlines()[0][:300]}")
        return envs

    def submit(self, spec: RunSpec) -> None:
        if len(self._inflight) >= self.workers:
            self._waiting.append(spec)
            return
        self._submit(_Job(spec, submitted=time.monotonic()))

    def _submit(self, job: _Job, avoid: str = "") -> None:
        spec = job.spec
        if spec.exclusive:
            nodes = [n for n in self._nodes() if n["NodeID"] != avoid] or self._nodes()
            if not nodes:
                nodes = self._alive()
            node = nodes[self._timing_rr % len(nodes)] if nodes else None
            self._timing_rr += 1
            if node is None:
                opts: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus, "max_retries": 0}
            else:
                job.node = node["NodeID"]
                opts = {"num_cpus": node["Resources"].get("CPU", self.cpus), "num_gpus": self.gpus,
                        "max_retries": 0, "scheduling_strategy": self._affinity(node["NodeID"], soft=False)}
        else:
            opts = {"num_cpus": self.cpus, "num_gpus": self.gpus, "max_retries": 1, "retry_exceptions": False}
        ref = self._run.options(**opts).remote(spec, self._tracker)
        self._inflight[ref] = job

    def pending(self) -> int:
        return len(self._inflight) + len(self._waiting)

    def _new_tracker(self) -> Any:
        """The run tracker, pinned to the head node (Ray's ``node:__internal_head__``
        resource): a worker node that dies must not take the start reports with it."""
        return self.ray.remote(num_cpus=0, resources={"node:__internal_head__": 0.001})(Tracker).remote()

    def poll(self, timeout: float) -> list[tuple[str, object]]:
        ray = self.ray
        events: list[tuple[str, object]] = []
        refs = list(self._inflight)
        if not refs:
            time.sleep(min(timeout, 0.05))
            return events
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready = ready + more
        now = time.monotonic()
        by_job = {j.spec.job: j for j in self._inflight.values()}
        try:
            started = ray.get(self._tracker.drain.remote(), timeout=60)
        except ray.exceptions.RayError as e:  # the tracker's node went away: a new one, starts unknown
            self._warn(f"the run tracker was lost ({type(e).__name__}); a new one is started")
            self._tracker, started = self._new_tracker(), []
        for job_id, host, _t in started:
            j = by_job.get(job_id)
            if j is None:
                continue
            j.starts += 1
            j.started_at, j.host = now, host
            self._last_progress = now
            events.append(("started", (job_id, host)))
        for ref in ready:
            job = self._inflight.pop(ref)
            self._last_progress = now
            oc = self._outcome(ref, job)
            if oc is not None:
                oc.attempts = max(oc.attempts, job.attempt, job.starts)
                events.append(("finished", oc))
        for ref, job in self._inflight.items():
            if job.started_at and not job.cancelled and now - job.started_at > job.spec.timeout + self.grace_s:
                job.cancelled = True
                ray.cancel(ref, force=True)
        while self._waiting and len(self._inflight) < self.workers:
            self._submit(_Job(self._waiting.popleft(), submitted=now))
        running = any(j.started_at for j in self._inflight.values())
        if self._inflight and not running and now - self._last_progress > self.schedule_timeout:
            spec = next(iter(self._inflight.values())).spec
            raise SchedulingError(
                f"{len(self._inflight) + len(self._waiting)} run(s) could not be scheduled: none started in "
                f"{self.schedule_timeout:g} s. Each asks for {self.cpus:g} CPU(s) and {self.gpus:g} GPU(s)"
                + (" (timing runs: all CPUs of one node)" if spec.exclusive else "")
                + f"; the cluster has {self._resources()}. Lower --gpus-per-task, add nodes with GPUs, "
                "or raise --schedule-timeout")
        return events

    def _outcome(self, ref: Any, job: _Job) -> RunOutcome | None:
        ray = self.ray
        spec = job.spec
        try:
            return ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            status = "timeout" if job.cancelled else "killed"
            msg = (f"force-cancelled {spec.timeout + self.grace_s:g} s after it started" if job.cancelled
                   else "cancelled: kws screen stopped")
            return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status=status,
                              stderr_tail=msg, host=job.host, attempts=job.attempt)
        except ray.exceptions.RayTaskError as e:  # run_spec itself raised: a kws bug
            return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="crash",
                              stderr_tail=str(e)[-4000:], host=job.host, attempts=job.attempt)
        except ray.exceptions.RayError as e:  # the node or the worker died, or unschedulable
            if spec.exclusive and job.attempt == 1:
                retry = _Job(spec, submitted=time.monotonic(), attempt=2)
                self._submit(retry, avoid=job.node)
                return None
            return RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="lost",
                              stderr_tail=f"{type(e).__name__}: {str(e).splitlines()[0][:600] if str(e) else ''}",
                              host=job.host, attempts=max(2, job.attempt))

    def cancel_all(self) -> None:
        self._waiting.clear()
        for ref in list(self._inflight):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001  (already finished)
                pass

    def close(self) -> None:
        self.cancel_all()
        try:
            self.ray.shutdown()
        except Exception:  # noqa: BLE001  (closing: runs are cancelled above; Ray failing to shut down must not fail a finished screen)
            pass
