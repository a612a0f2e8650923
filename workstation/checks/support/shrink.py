"""A generic greedy shrinker, as property-based testing tools shrink a failing example
(Hypothesis, QuickCheck): from a failing input, try simpler candidates, move to the simplest
one that still fails the same way, repeat until nothing simpler fails or the budget is spent.

The caller supplies what "simpler", "fails the same way" and "cost" mean; the shrinker only
drives the search. Candidates of one round run as one batch (``run``), so a caller that
runs task code in child processes pays one round trip per round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")


@dataclass
class Shrunk(Generic[R]):
    """The outcome: ``best`` (the simplest failing result found; ``start`` when none was
    simpler), ``path`` (every accepted step, ``start`` first), ``spent`` (the summed cost of
    every candidate run), ``rounds``."""

    best: R
    path: list[R] = field(default_factory=list)
    spent: float = 0.0
    rounds: int = 0


def shrink(start: R, *, candidates: Callable[[R], Sequence[Any]], run: Callable[[Sequence[Any]], list[R]],
           keeps_failure: Callable[[R], bool], size: Callable[[R], Any],
           cost: Callable[[R], float] = lambda r: 0.0, budget: float | None = None,
           max_rounds: int = 6) -> Shrunk[R]:
    """Shrink the failing result ``start``.

    Args:
        start: a failing result.
        candidates: simpler inputs to try from a result (empty: nothing simpler).
        run: runs a batch of inputs, returning one result each.
        keeps_failure: whether a result fails the way ``start`` does.
        size: the order of simplicity (smaller is simpler); ties keep the first.
        cost: what running one result cost (seconds), summed into ``spent``.
        budget: stop before a round once ``spent`` reaches it (None: no budget).
        max_rounds: at most this many rounds.
    """
    out = Shrunk(start, [start])
    for _ in range(max_rounds):
        tries = candidates(out.best)
        if not tries or (budget is not None and out.spent >= budget):
            break
        results = run(tries)
        out.rounds += 1
        out.spent += sum(cost(r) for r in results)
        same = [r for r in results if keeps_failure(r)]
        if not same:
            break
        out.best = min(same, key=size)
        out.path.append(out.best)
    return out
