"""Helpers for the kws screen tests: a queue repository built from sample tasks, and a backend
that records what it is asked to run without running it."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from tests.conftest import SAMPLE_QUEUE
from tests.recordkit import ALICE, set_repo_identity
from workstation.screen.keys import NodeEnv
from workstation.screen.worker import RunOutcome, RunSpec

#: cheap sample tasks: `--only correctness` runs them in seconds each under the interpreter
CHEAP = ("copy-cast-oob", "relu-unwritten", "scale-rows-noncontig")


def sample_queue_repo(path: Path, tasks: tuple[str, ...] = CHEAP) -> git.Repo:
    """A git queue at ``path`` holding copies of ``tasks`` from the sample queue (one commit)."""
    (path / "tasks").mkdir(parents=True)
    shutil.copy(SAMPLE_QUEUE / "queue.toml", path / "queue.toml")
    (path / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    for t in tasks:
        shutil.copytree(SAMPLE_QUEUE / "tasks" / t, path / "tasks" / t,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    repo = git.Repo.init(path, initial_branch="main")
    set_repo_identity(repo, ALICE)
    repo.git.add("--all")
    repo.git.commit("-q", "-m", "queue")
    return repo


ENV = NodeEnv(device="cpu (triton interpreter)",
              versions={"kws": "0.1.0", "torch": "2.13.0", "triton": "3.9.0", "python": "3.11.7"},
              libs={"torch": "torch 2.13.0", "triton": "triton 3.9.0"}, host="testhost")


class FakeBackend:
    """A backend that runs nothing: ``submit`` answers each run with a canned report of its
    checks, all ``pass`` (or the outcome ``outcome_for(spec)`` gives)."""

    name = "fake"

    def __init__(self, env: NodeEnv = ENV, outcome_for=None) -> None:
        self.env = env
        self.specs: list[RunSpec] = []
        self._done: list[tuple[str, object]] = []
        self.outcome_for = outcome_for

    def envs(self, modules, device):
        return [self.env]

    def describe(self) -> str:
        return "fake"

    def submit(self, spec: RunSpec) -> None:
        self.specs.append(spec)
        if self.outcome_for is not None:
            oc = self.outcome_for(spec)
        else:
            report = {"task": spec.task, "task_tree": None, "device": self.env.device, "complete": True,
                      "versions": dict(self.env.versions), "seeds": [0, 1, 2], "findings": [],
                      "checks": [{"check": c, "status": "pass", "seconds": 0.1, "reason": ""} for c in spec.only],
                      "title": spec.task, "seconds": 0.1 * len(spec.only), "warnings": []}
            oc = RunOutcome(job=spec.job, task=spec.task, part=spec.part, status="ok", exit_code=0, report=report,
                            host=self.env.host, started="2026-01-01T00:00:00+00:00",
                            finished="2026-01-01T00:00:01+00:00", seconds=1.0, libs=dict(self.env.libs))
        self._done.append(("started", (spec.job, self.env.host)))
        self._done.append(("finished", oc))

    def pending(self) -> int:
        return 0

    def poll(self, timeout: float):
        out, self._done = self._done, []
        return out

    def cancel_all(self) -> None:
        pass

    def close(self) -> None:
        pass
