"""What the app's workers and signals carry: :class:`QueueLoaded` and :class:`CheckEvent`
(messages a worker thread posts to the app), :class:`SessionEvent` (the payload of the
app's ``session_event`` signal, which review screens subscribe to), and what the review
screen's workers post to it: :class:`TreeKnown`, :class:`TokensLoaded`,
:class:`HistoryLoaded`, :class:`ViewLoaded`, :class:`Committed`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from workstation.review.actions import CommitOutcome
from workstation.review.services import QueueState, TaskHistory, TaskTree
from workstation.review.session import ReviewSession

__all__ = ["CheckEvent", "Committed", "HistoryLoaded", "QueueLoaded", "SessionEvent", "TokensLoaded", "TreeKnown",
           "ViewLoaded"]

#: a file's syntax tokens per line: ``[[(token type, text), ...], ...]``
#: (:func:`workstation.review.diff.highlight_lines`), None for a side without the file.
Tokens = list[list[tuple[str, str]]] | None


class QueueLoaded(Message):
    """A worker finished a stage of (re)loading the queue: index, records, identity."""

    def __init__(self, state: QueueState) -> None:
        super().__init__()
        self.state = state


class CheckEvent(Message):
    """One normalised engine event of run ``run`` for ``session`` (posted from a worker
    thread)."""

    def __init__(self, session: ReviewSession, run: int, kind: str, data: dict[str, Any]) -> None:
        super().__init__()
        self.session = session
        self.run = run
        self.kind = kind
        self.data = data


@dataclass(frozen=True)
class SessionEvent:
    """A check event was applied to ``session``: its ``kind`` and the check it concerns
    (None for run-wide events: start, done, error)."""

    session: ReviewSession
    kind: str
    check: str | None


class TreeKnown(Message):
    """The git tree id of the task in HEAD, and the paths where the work tree differs."""

    def __init__(self, tree: TaskTree) -> None:
        super().__init__()
        self.tree, self.dirty = tree.tree, tree.dirty


class TokensLoaded(Message):
    """Syntax tokens of one of the task's files (``label``), old and new side."""

    def __init__(self, label: str, old: Tokens, new: Tokens) -> None:
        super().__init__()
        self.label, self.old, self.new = label, old, new


class HistoryLoaded(Message):
    """The task's history (text), its verdicts, oldest first, and its unverified records
    (one line each: they do not count)."""

    def __init__(self, history: TaskHistory) -> None:
        super().__init__()
        self.text, self.verdicts = history.text, list(history.verdicts)
        self.unverified = tuple(history.unverified)


class ViewLoaded(Message):
    """The task view (spec, diffs) has been built by its worker."""


class Committed(Message):
    """The outcome of a verdict commit: ``verdict`` committed, or ``error`` says why not."""

    def __init__(self, outcome: CommitOutcome) -> None:
        super().__init__()
        self.verdict, self.error = outcome.verdict, outcome.error
