"""What the app's workers and signals carry: :class:`QueueLoaded` and :class:`CheckEvent`
(messages a worker thread posts to the app) and :class:`SessionEvent` (the payload of the
app's ``session_event`` signal, which review screens subscribe to)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from workstation.review.services import QueueState
from workstation.review.session import ReviewSession

__all__ = ["CheckEvent", "QueueLoaded", "SessionEvent"]


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
