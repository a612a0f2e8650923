"""Isolated execution of untrusted task code.

The parent (the CLI or the TUI) never imports task code, torch or triton. It starts one
*fork server* (:mod:`workstation.harness.forkserver`) inside a bubblewrap sandbox
(:mod:`bwrap`; the reviewer may opt out: :mod:`policy`), in a memory cgroup where the
machine allows one (:mod:`cgroup`), with a scrubbed environment; the server imports torch
and triton once, then forks one job per request, each in namespaces of its own
(:mod:`workstation.harness.jobns`). Each job runs :mod:`workstation.harness` on a copy of
the task folder (:mod:`taskcopy`), with resource limits, and writes its results as JSON
plus ``.npz`` arrays that the parent reads as hostile input (:mod:`workstation.protocol.wire`).
The parent side: :mod:`sandbox` (the :class:`Runner`), :mod:`admission` (which jobs may run
at once), :mod:`server` (the fork server's process), :mod:`limits` (resource limits, CPU
budgets), :mod:`results` (reading a job's results back).

Of kws, imports only protocol, schema and settings (an import-linter contract); never harness (it
starts the fork server by module name), task, repo, engine or anything above.
"""

from workstation.protocol.wire import StepResult, TensorData
from workstation.runner.results import JobResult
from workstation.runner.sandbox import JobCancelled, Runner
from workstation.runner.server import DeviceInfo, RunnerError, SandboxUnavailable
from workstation.runner.taskcopy import TaskFolderError

__all__ = ["DeviceInfo", "JobCancelled", "JobResult", "Runner", "RunnerError", "SandboxUnavailable", "StepResult", "TaskFolderError",
           "TensorData"]
