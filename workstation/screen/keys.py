"""What a screening result is keyed by: the task version, the queue's shared helper folder,
what was run, and the environment of the node that ran it.

A result is reused only for the same :class:`ScreenKey`:

- ``tree``: the git tree id of ``tasks/<id>`` in ``HEAD`` (:mod:`workstation.repo.gitqueue`);
  a task whose work tree differs from ``HEAD`` has no key (it is screened, never stored);
- ``shared``: the tree id of the queue's shared helper folder (:func:`shared_folder`), or
  None where the queue has none;
- ``checks``, ``seeds``, ``args``: the check ids run (after ``--only`` and the task's kind),
  the input seeds and the extra ``kws check`` arguments (sandbox flags, ``--device``);
- ``kws``, ``device``, ``versions`` (torch, triton, python, as the fork server reports
  them) and ``libs``: the versions of the distributions that provide the task's external
  imports on that node (:func:`library_versions`).

:meth:`ScreenKey.digest` is a SHA-256 of the key's canonical JSON: equal keys, equal digests.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from workstation.repo.gitqueue import git_text
from workstation.schema.problem import Problem
from workstation.schema.toml import read_toml

__all__ = [
    "ENV_VERSION_KEYS",
    "NodeEnv",
    "ScreenKey",
    "dirty_tasks",
    "library_versions",
    "probe_env",
    "shared_folder",
    "shared_tree",
    "task_modules",
    "task_trees",
]

#: the report's ``versions`` entries that are part of a key (besides ``kws``).
ENV_VERSION_KEYS = ("torch", "triton", "python")

#: queue.toml keys that may name the queue's shared helper folder (issue 13 adds the folder;
#: the first string value found wins), then the folder names looked for at the queue root.
SHARED_FOLDER_KEYS = ("shared_helpers", "helpers", "shared")
SHARED_FOLDER_NAMES = ("shared", "helpers")

#: top-level modules that are kws itself or never a task's library.
_NOT_LIBRARIES = frozenset({"workstation", "__future__"})


@dataclass(frozen=True)
class NodeEnv:
    """The environment a node runs ``kws check`` in.

    ``device`` and ``versions`` are what the node's fork server reports (the report's
    ``device`` and ``versions``); ``libs`` maps a top-level module name to
    ``"<distribution> <version>"`` for the modules asked about (``""``: no installed
    distribution provides it); ``host`` is the host name (with the node's IP on a cluster),
    ``node`` the cluster's node id (``""`` locally).
    """

    device: str
    versions: Mapping[str, str]
    libs: Mapping[str, str] = field(default_factory=dict)
    host: str = ""
    node: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "versions": dict(self.versions), "libs": dict(self.libs),
                "host": self.host, "node": self.node}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeEnv:
        return cls(str(d["device"]), {str(k): str(v) for k, v in dict(d["versions"]).items()},
                   {str(k): str(v) for k, v in dict(d.get("libs") or {}).items()},
                   str(d.get("host") or ""), str(d.get("node") or ""))


@dataclass(frozen=True)
class ScreenKey:
    """The identity of one screening result (see the module docstring)."""

    task: str
    tree: str
    shared: str | None
    checks: tuple[str, ...]
    seeds: tuple[int, ...]
    args: tuple[str, ...]
    kws: str
    device: str
    versions: Mapping[str, str]
    libs: Mapping[str, str]

    @classmethod
    def of(cls, *, task: str, tree: str, shared: str | None, checks: Iterable[str], seeds: Iterable[int],
           args: Iterable[str], env: NodeEnv, modules: Iterable[str],
           report: Mapping[str, Any] | None = None, libs: Mapping[str, str] | None = None) -> ScreenKey:
        """The key of ``task`` run on ``env``. What the run itself saw takes precedence over
        the probe: a ``report``'s ``device`` and ``versions``, the worker's ``libs``."""
        device = env.device
        versions = dict(env.versions)
        if report is not None:
            device = str(report.get("device") or device)
            versions.update({str(k): str(v) for k, v in dict(report.get("versions") or {}).items()})
        mods = sorted(set(modules))
        return cls(task=task, tree=tree, shared=shared, checks=tuple(checks), seeds=tuple(seeds),
                   args=tuple(args), kws=str(versions.get("kws", "")), device=device,
                   versions={k: versions[k] for k in ENV_VERSION_KEYS if k in versions},
                   libs={m: (libs if libs is not None else env.libs).get(m, "") for m in mods})

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "tree": self.tree, "shared": self.shared, "checks": list(self.checks),
                "seeds": list(self.seeds), "args": list(self.args), "kws": self.kws, "device": self.device,
                "versions": dict(sorted(self.versions.items())), "libs": dict(sorted(self.libs.items()))}

    def digest(self) -> str:
        """SHA-256 (hex) of the key's canonical JSON (sorted keys, no spaces)."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# task versions in HEAD


def task_trees(repo: git.Repo) -> dict[str, str]:
    """``{task id: tree id}`` of every folder under ``tasks/`` in ``HEAD`` (one ``git
    ls-tree``); empty when HEAD has no commit or no ``tasks/``."""
    try:
        out = git_text(repo, "ls-tree", "-z", "HEAD", "tasks/")
    except git.GitCommandError:
        return {}
    trees: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "tree" and path.startswith("tasks/"):
            trees[path[len("tasks/"):]] = parts[2]
    return trees


def dirty_tasks(repo: git.Repo, paths: Iterable[str] = ()) -> tuple[set[str], bool]:
    """Task ids whose folder differs from ``HEAD`` (modified, staged, deleted or untracked;
    ignored files excluded), and whether any of ``paths`` (e.g. the shared helper folder)
    does. One ``git status`` for the whole queue."""
    extra = [p.rstrip("/") for p in paths if p]
    out = git_text(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "tasks", *extra)
    dirty: set[str] = set()
    other = False
    tokens = iter(out.split("\0"))
    for entry in tokens:
        if len(entry) < 4:
            continue
        names = [entry[3:]]
        if "R" in entry[:2] or "C" in entry[:2]:
            names.append(next(tokens, ""))
        for name in names:
            if name.startswith("tasks/"):
                tid = name[len("tasks/"):].split("/", 1)[0]
                if tid:
                    dirty.add(tid)
            elif name:
                other = True
    return dirty, other


def shared_folder(root: Path | str) -> str | None:
    """The queue's shared helper folder, relative to the queue root, or None.

    Read defensively (issue 13 defines the folder): the first string value of
    :data:`SHARED_FOLDER_KEYS` in ``queue.toml`` that names a folder inside the queue, else
    the first of :data:`SHARED_FOLDER_NAMES` that is a folder at the queue root. A
    ``queue.toml`` that does not parse is ignored here (``kws queue`` reports it).
    """
    root = Path(root)
    qt = root / "queue.toml"
    if qt.is_file():
        try:
            data = read_toml(qt)
        except Problem:
            data = {}
        for k in SHARED_FOLDER_KEYS:
            v = data.get(k)
            if isinstance(v, dict):
                v = v.get("path") or v.get("folder")
            if isinstance(v, str) and v.strip():
                rel = Path(v.strip())
                try:
                    resolved = (root / rel).resolve()
                    resolved.relative_to(root.resolve())
                except (OSError, ValueError):
                    continue
                if resolved.is_dir() and not rel.is_absolute():
                    return rel.as_posix().rstrip("/")
    for name in SHARED_FOLDER_NAMES:
        if (root / name).is_dir():
            return name
    return None


def shared_tree(repo: git.Repo, folder: str | None) -> str | None:
    """The tree id of ``folder`` in ``HEAD`` (None: no folder, or not committed)."""
    if not folder:
        return None
    try:
        obj = repo.head.commit.tree / folder
    except (KeyError, ValueError):
        return None
    return obj.hexsha if obj.type == "tree" else None


# --------------------------------------------------------------------------------------------
# the node's environment


def task_modules(task: Any) -> set[str]:
    """The top-level names of the task's external imports (those that resolve to no file of
    the task): the libraries whose versions are part of its key. Read statically through
    :mod:`workstation.task.sources`; a file that does not parse contributes nothing."""
    from workstation.task.sources import TaskSources

    src = TaskSources(task.dir)
    mods: set[str] = set()
    for ref in task.entry.values():
        rel = getattr(ref, "file", None)
        if not rel:
            continue
        try:
            names = src.all_imports(rel)
        except (OSError, SyntaxError, ValueError):
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if not top or top in _NOT_LIBRARIES or top in sys.stdlib_module_names:
                continue
            if (Path(task.dir) / top).is_dir() or (Path(task.dir) / f"{top}.py").is_file():
                continue
            mods.add(top)
    return mods


_PROVIDERS: Mapping[str, list[str]] | None = None


def library_versions(modules: Iterable[str]) -> dict[str, str]:
    """``{module: "<distribution> <version>"}`` for top-level ``modules`` in this Python
    (``""`` where no installed distribution provides the module); nothing is imported.

    A distribution named like the module is taken directly (``importlib.metadata``, a few
    ms); others are looked up in :func:`importlib.metadata.packages_distributions`, built
    once per process (it reads every installed distribution: about a second).
    """
    global _PROVIDERS
    out: dict[str, str] = {}
    for m in sorted(set(modules)):
        try:
            d = importlib.metadata.distribution(m)
            out[m] = f"{d.metadata['Name']} {d.version}"
            continue
        except (importlib.metadata.PackageNotFoundError, ValueError):
            pass
        if _PROVIDERS is None:
            _PROVIDERS = importlib.metadata.packages_distributions()
        parts = []
        for name in sorted(set(_PROVIDERS.get(m, ()))):
            try:
                parts.append(f"{name} {importlib.metadata.version(name)}")
            except importlib.metadata.PackageNotFoundError:
                continue
        out[m] = ", ".join(parts)
    return out


def probe_env(modules: Iterable[str] = (), device: str | None = None, node: str = "",
              host: str | None = None) -> NodeEnv:
    """This machine's environment for ``kws check``: starts a fork server (as ``kws
    check`` does, so the device and versions are the ones its reports will name), reads them
    and closes it; adds :func:`library_versions` of ``modules``.

    Raises:
        workstation.runner.RunnerError: the fork server did not start.
    """
    from workstation.runner import Runner

    with Runner(device=device, max_parallel=1) as r:
        info = r.device
    return NodeEnv(device=info.label, versions=dict(info.versions), libs=library_versions(modules),
                   host=host or socket.gethostname(), node=node)
