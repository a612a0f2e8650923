"""Uninitialised memory reads the same in every job: NaN for floating and complex dtypes,
the largest value for integers.

Without it, memory ``torch.empty`` hands out holds whatever the allocator last put there, so
an output the candidate never writes looks different from job to job, and which check
notices it (and how) depends on whether that garbage happened to hold a NaN. With it, every
job of a correctness step sees the same fill, so an unwritten element is the same NaN in
every run and every check (issue 39, item 4).

How: PyTorch's own switch, ``torch.utils.deterministic.fill_uninitialized_memory``, which
``torch.empty``, ``empty_like``, ``empty_strided`` and the growth of ``resize_`` honour while
``torch.use_deterministic_algorithms`` is on; it is turned on with ``warn_only=True``, so an
op without a deterministic implementation warns (on stderr) instead of raising: the candidate
runs the same code. Timing jobs (``timing``, ``torch_timer``, ``author_bench``, ``profile``)
are left as PyTorch ships: the fill is a memset per allocation, and their numbers must be the
candidate's, not kws's.
"""

from __future__ import annotations

from workstation.harness import job_hook
from workstation.protocol.steps import AuthorBenchStep, Job, ProfileStep, TimingStep, TorchTimerStep

#: step kinds whose jobs keep PyTorch's own allocation behaviour (timed code).
TIMED = (TimingStep, TorchTimerStep, AuthorBenchStep, ProfileStep)


@job_hook
def fill_uninitialised(job: Job) -> None:
    """Turn the fill on for a job that times nothing (module doc)."""
    if any(isinstance(s, TIMED) for s in job.steps):
        return
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
