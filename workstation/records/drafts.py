"""Unsent verdicts (drafts), kept outside the queue's work tree.

A draft is what the reviewer has entered so far for one task in one queue: the rubric field
values, the rationale, and the check report the suggestions came from. It lives in
``<state dir>/drafts/<queue key>/<task id>.json`` (state dir: ``$KWS_STATE_DIR`` or
``platformdirs.user_state_dir("kws")``), so that nothing a sync, a rebase or a
``git clean`` does to the queue can lose it, and a crash or a dropped SSH session can't
either: :func:`save_draft` writes a temporary file and renames it over the old one
(atomic on POSIX). A draft is removed only after its verdict is committed
(:func:`workstation.records.store.commit_verdict`).

Drafts are private working state, not records, so they are JSON (the check report they
carry may hold values TOML cannot, such as null).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "Draft",
    "FormDraft",
    "delete_draft",
    "delete_form_draft",
    "draft_path",
    "form_draft_path",
    "list_drafts",
    "load_draft",
    "load_form_draft",
    "save_draft",
    "save_form_draft",
]

_DRAFT_SCHEMA = 1


@dataclass
class Draft:
    """An unsent verdict on ``task`` in the queue at ``queue`` (absolute path).

    ``values`` maps rubric field keys to values, the rationale included under the rubric's
    rationale field key. ``task_tree`` is the git tree id of the task version the reviewer
    is judging (the one the checks ran on), or None before it is known. ``report`` is the
    ``kws check --json`` report (task format v1) the suggestions came from, or None when no
    checks ran. ``suggested`` maps the fields whose value was taken from kws's suggestion
    to where that suggestion came from (:data:`workstation.records.model.PROVENANCES`);
    ``unfinished_checks`` lists the checks of the run without a result yet (queued or
    running). ``updated`` is the UTC time of the last save.
    """

    task: str
    queue: str
    values: dict[str, str] = field(default_factory=dict)
    rubric_id: str = ""
    rubric_version: int = 0
    task_tree: str | None = None
    report: dict[str, Any] | None = None
    suggested: dict[str, str] = field(default_factory=dict)
    unfinished_checks: list[str] = field(default_factory=list)
    updated: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": _DRAFT_SCHEMA,
            "task": self.task,
            "queue": self.queue,
            "values": dict(self.values),
            "rubric_id": self.rubric_id,
            "rubric_version": self.rubric_version,
            "task_tree": self.task_tree,
            "report": self.report,
            "suggested": dict(self.suggested),
            "unfinished_checks": list(self.unfinished_checks),
            "updated": self.updated.isoformat() if self.updated else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Draft:
        updated = data.get("updated")
        return cls(
            task=str(data["task"]),
            queue=str(data["queue"]),
            values={str(k): str(v) for k, v in (data.get("values") or {}).items()},
            rubric_id=str(data.get("rubric_id") or ""),
            rubric_version=int(data.get("rubric_version") or 0),
            task_tree=data.get("task_tree"),
            report=data.get("report"),
            suggested={str(k): str(v) for k, v in (data.get("suggested") or {}).items()},
            unfinished_checks=[str(c) for c in data.get("unfinished_checks") or []],
            updated=datetime.fromisoformat(updated) if updated else None,
        )


def _queue_key(queue: Path | str) -> str:
    p = Path(queue).expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", p.name) or "queue"
    return f"{slug}-{hashlib.sha256(str(p).encode()).hexdigest()[:10]}"


def draft_path(queue: Path | str, task: str) -> Path:
    """Where the draft for ``task`` in the queue at ``queue`` lives."""
    # imported here: gitqueue imports git, which the review app needs only after its first paint
    from workstation.repo.gitqueue import state_dir

    return state_dir() / "drafts" / _queue_key(queue) / f"{task}.json"


def save_draft(draft: Draft) -> Path:
    """Write ``draft`` atomically (temporary file, fsync, rename); returns its path.

    Sets ``draft.updated`` to now (UTC) and normalises ``draft.queue`` to an absolute path.

    Raises:
        OSError: the drafts folder cannot be written (a full disk, no permission).
    """
    draft.queue = str(Path(draft.queue).expanduser().resolve())
    draft.updated = datetime.now(UTC)
    path = draft_path(draft.queue, draft.task)
    _write_json(path, draft.to_json(), draft.task)
    return path


def _write_json(path: Path, data: dict[str, Any], stem: str) -> None:
    """Write ``data`` as JSON at ``path`` atomically (temporary file, fsync, rename).

    Raises:
        OSError: the folder cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_draft(queue: Path | str, task: str) -> Draft | None:
    """The saved draft for ``task``, or None. A draft file that does not parse is kept
    aside as ``<task>.json.corrupt`` (never deleted) and None is returned."""
    path = draft_path(queue, task)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Draft.from_json(data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        path.replace(path.with_name(path.name + ".corrupt"))
        return None


def delete_draft(queue: Path | str, task: str) -> bool:
    """Remove the draft for ``task``; True when there was one."""
    path = draft_path(queue, task)
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def list_drafts(queue: Path | str) -> list[Draft]:
    """Every readable draft of the queue at ``queue``, by task id."""
    folder = draft_path(queue, "x").parent
    out = []
    for p in sorted(folder.glob("*.json")):
        d = load_draft(queue, p.stem)
        if d is not None:
            out.append(d)
    return out


# --------------------------------------------------------------------------------------------
# dispute and resolution forms


#: the record kinds whose forms keep drafts, and what their ``target`` id names.
FORM_KINDS = {"dispute": "verdict", "resolution": "dispute"}


@dataclass
class FormDraft:
    """What a reviewer has entered in a dispute or resolution form but not committed.

    ``kind``: ``dispute`` (``target``: the disputed verdict's id) or ``resolution``
    (``target``: the dispute's id); ``values``: the picked field values; ``outcome``: a
    resolution's outcome (None: not picked); ``rationale``; ``updated``: the UTC time of
    the last save. One draft per queue, kind and target, next to the verdict drafts (in a
    ``forms/`` folder of their own), deleted once the record is committed.
    """

    kind: str
    task: str
    queue: str
    target: str
    values: dict[str, str] = field(default_factory=dict)
    outcome: str | None = None
    rationale: str = ""
    updated: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema": _DRAFT_SCHEMA, "kind": self.kind, "task": self.task, "queue": self.queue,
                "target": self.target, "values": dict(self.values), "outcome": self.outcome,
                "rationale": self.rationale, "updated": self.updated.isoformat() if self.updated else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FormDraft:
        updated = data.get("updated")
        return cls(kind=str(data["kind"]), task=str(data["task"]), queue=str(data["queue"]),
                   target=str(data["target"]),
                   values={str(k): str(v) for k, v in (data.get("values") or {}).items()},
                   outcome=str(data["outcome"]) if data.get("outcome") else None,
                   rationale=str(data.get("rationale") or ""),
                   updated=datetime.fromisoformat(updated) if updated else None)

    @property
    def empty(self) -> bool:
        """Nothing entered (no value, no outcome, no rationale)."""
        return not self.values and not self.outcome and not self.rationale.strip()


def form_draft_path(queue: Path | str, kind: str, target: str) -> Path:
    """Where the ``kind`` form's draft for record ``target`` in the queue at ``queue`` lives.

    Raises:
        ValueError: ``kind`` is not a form kind, or ``target`` is not a record id.
    """
    if kind not in FORM_KINDS or not re.fullmatch(r"[0-9a-f-]{8,64}", target):
        raise ValueError(f"no form draft for {kind!r} {target!r}")
    return draft_path(queue, "x").parent / "forms" / f"{kind}--{target}.json"


def save_form_draft(draft: FormDraft) -> Path:
    """Write ``draft`` atomically (as :func:`save_draft`); an empty one deletes the file.

    Raises:
        OSError: the drafts folder cannot be written.
    """
    draft.queue = str(Path(draft.queue).expanduser().resolve())
    draft.updated = datetime.now(UTC)
    path = form_draft_path(draft.queue, draft.kind, draft.target)
    if draft.empty:
        path.unlink(missing_ok=True)
    else:
        _write_json(path, draft.to_json(), draft.kind)
    return path


def load_form_draft(queue: Path | str, kind: str, target: str) -> FormDraft | None:
    """The saved ``kind`` form draft for ``target``, or None. One that does not parse is
    kept aside as ``.json.corrupt`` and None is returned."""
    path = form_draft_path(queue, kind, target)
    try:
        d = FormDraft.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        path.replace(path.with_name(path.name + ".corrupt"))
        return None
    return d if d.kind == kind and d.target == target else None


def delete_form_draft(queue: Path | str, kind: str, target: str) -> bool:
    """Remove the ``kind`` form draft for ``target``; True when there was one."""
    try:
        form_draft_path(queue, kind, target).unlink()
        return True
    except FileNotFoundError:
        return False
