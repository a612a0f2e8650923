"""An exception's chain: the exception, then what caused it (``__cause__``, else the
exception being handled when it was raised, ``__context__``), bounded."""

from __future__ import annotations

#: how many links of a chain kws reads (a cycle or a long chain stops there).
CHAIN_LIMIT = 8


def chain(e: BaseException, limit: int = CHAIN_LIMIT) -> list[BaseException]:
    """``e`` and its causes, nearest first, at most ``limit`` of them."""
    out: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and len(out) < limit:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out
