"""Helpers for the record tests: isolated git configuration, small real queues, clones.

Git identity is only ever set through environment variables or a repository's own config
(never the global config): :func:`isolate` points HOME and GIT_CONFIG_GLOBAL at an empty
file inside the test's tmp_path and turns off the system config.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import git

from workstation.records.drafts import Draft
from workstation.records.store import commit_verdict
from workstation.repo.gitqueue import Identity
from workstation.rubric.model import find_rubric

ALICE = Identity("Alice Reviewer", "alice@example.com")
BOB = Identity("Bob Reviewer", "bob@example.com")
CAROL = Identity("Carol Reviewer", "carol@example.com")

RUBRIC = find_rubric("kernel-review")

_IDENT_VARS = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_DATE",
)


def isolate(monkeypatch, tmp_path: Path) -> None:
    """No identity anywhere: empty global config, no system config, no identity env vars;
    kws data and state folders inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("KWS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KWS_STATE_DIR", str(tmp_path / "state"))
    for v in _IDENT_VARS:
        monkeypatch.delenv(v, raising=False)


def use_identity(monkeypatch, who: Identity) -> None:
    """The reviewer's identity through git's environment variables."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", who.name)
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", who.email)
    monkeypatch.setenv("GIT_COMMITTER_NAME", who.name)
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", who.email)


def set_repo_identity(repo: git.Repo, who: Identity | None) -> None:
    """Set (or, with None, remove) user.name / user.email in the repository's own config."""
    with repo.config_writer() as cw:
        if who is None:
            for opt in ("name", "email"):
                if cw.has_option("user", opt):
                    cw.remove_option("user", opt)
        else:
            cw.set_value("user", "name", who.name)
            cw.set_value("user", "email", who.email)


TASK_TOML = """schema = 1
id = "{id}"
title = "Task {id}"
kind = "generation"
backend = "triton"
spec = "spec.md"

[entry]
candidate = "candidate.py:run"
reference = "reference.py:run"
inputs = "inputs.py:make_inputs"

[[cases]]
N = 64
dtype = "float32"

[claims]
status = "pass"
"""


#: The test queues' queue.toml: local-only, records unsigned (tests of signing add their own).
QUEUE_TOML = 'name = "test queue"\nrubric = "kernel-review"\n\n[records]\nsignatures = "off"\n'


def make_queue(path: Path, tasks: tuple[str, ...] = ("alpha", "beta"), who: Identity = ALICE) -> git.Repo:
    """A queue repository at ``path`` with ``tasks`` (minimal files), one commit on main,
    and ``who`` in its own config."""
    path.mkdir(parents=True)
    (path / "queue.toml").write_text(QUEUE_TOML)
    for t in tasks:
        d = path / "tasks" / t
        d.mkdir(parents=True)
        (d / "task.toml").write_text(TASK_TOML.format(id=t))
        (d / "spec.md").write_text(f"# {t}\n")
        (d / "candidate.py").write_text("def run(x):\n    return x\n")
        (d / "reference.py").write_text("def run(x):\n    return x\n")
    repo = git.Repo.init(path, initial_branch="main")
    set_repo_identity(repo, who)
    repo.git.add("--all")
    repo.git.commit("-q", "-m", "queue")
    return repo


def make_remote(tmp_path: Path, n_clones: int, tasks: tuple[str, ...] = ("alpha", "beta")) -> tuple[Path, list[git.Repo]]:
    """A bare remote seeded with a queue, and ``n_clones`` clones of it (no identity set)."""
    seed = make_queue(tmp_path / "seed", tasks)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    seed.git.push("-q", str(bare), "main:main")
    clones = []
    for i in range(n_clones):
        clones.append(git.Repo.clone_from(str(bare), tmp_path / f"clone{i}"))
    return bare, clones


def values(overall: str = "accept", rationale: str = "", **over: str) -> dict[str, str]:
    """A complete set of kernel-review values."""
    v = {
        "reference": "legitimate",
        "tolerance": "appropriate",
        "correctness": "correct",
        "edge_coverage": "covered",
        "benchmark": "not-applicable",
        "failure_report": "not-applicable",
        "overall": overall,
        "rationale": rationale or ("rejected: see the findings" if overall == "reject" else ""),
    }
    v.update(over)
    return v


def verdict(repo: git.Repo, task: str, who: Identity, overall: str = "accept", report: dict | None = None, **over: str):
    """Commit a verdict on ``task`` as ``who`` through the public API."""
    d = Draft(task=task, queue=repo.working_tree_dir, values=values(overall, **over),
              rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, report=report)
    return commit_verdict(repo, d, RUBRIC, identity=who)


def git_lines(repo: git.Repo, *args: str) -> list[str]:
    return [ln for ln in repo.git.execute(["git", *args]).splitlines() if ln.strip()]


def env_without_identity() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _IDENT_VARS}


def records_cli():
    """A click group holding every records command of ``kws`` (verdict, dispute, history, ...),
    for ``CliRunner`` tests that need no app and no battery."""
    import click

    from workstation.cli import records as cli_records
    from workstation.cli import signing as cli_signing

    @click.group()
    def main() -> None:
        pass

    for cmd in (*cli_records.COMMANDS, *cli_signing.COMMANDS):
        main.add_command(cmd)
    return main
