"""Isolated execution of untrusted task code.

The parent (the CLI or the TUI) never imports task code, torch or triton. It starts one
*fork server* (:mod:`workstation.harness.forkserver`) with a scrubbed environment; the
server imports torch and triton once, then forks one child per job. Each child runs
:mod:`workstation.harness` on a temporary copy of the task folder, in its own process
group, with resource limits, and writes its results as JSON plus ``.npz`` arrays that the
parent reads without unpickling (:mod:`workstation.protocol.wire`).

May import protocol and the standard library; never harness (it starts the fork server by
module name), engine or anything above.
"""

from workstation.protocol.wire import StepResult, TensorData
from workstation.runner.sandbox import DeviceInfo, JobResult, Runner, RunnerError

__all__ = ["DeviceInfo", "JobResult", "Runner", "RunnerError", "StepResult", "TensorData"]
