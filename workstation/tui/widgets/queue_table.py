"""QueueTable: the queue screen's table of tasks (a :class:`CursorList`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from workstation.review.queueview import QueueRow
from workstation.tui.widgets.cursor_list import CursorList
from workstation.tui.widgets.text import fit

__all__ = ["QueueTable"]


@dataclass(frozen=True)
class _Col:
    title: str
    width: int


class QueueTable(CursorList):
    """The tasks of the queue: id, kind, backend, claimed status, reserved-by, open
    disputes, my verdict, the pre-screen (worst severity, failing check ids, how long ago
    and where it ran; ``*``: the work tree differs from the screened version), title.
    Column widths follow the terminal width (the title column takes what is left and
    disappears first on narrow terminals, then the pre-screen's age and failing ids)."""

    DEFAULT_CSS = """
    QueueTable { height: 1fr; }
    QueueTable > .cursorlist--cursor { text-style: reverse bold; }
    QueueTable > .cursorlist--header { text-style: bold underline; }
    QueueTable > .cursorlist--dim { text-style: dim; }
    """
    header_lines = 1

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[QueueRow] = []
        self._id_width = 8
        self._columns: tuple[int, list[_Col]] | None = None

    def set_rows(self, rows: list[QueueRow], keep: str | None = None) -> None:
        """Show ``rows``; the cursor stays on task ``keep`` (by id) when it is still shown."""
        self.rows = rows
        self._id_width = max([8] + [cell_len(r.id) for r in rows])
        self._columns = None
        if keep is not None:
            for i, r in enumerate(rows):
                if r.id == keep:
                    self.cursor = i
                    break
        self.refresh_rows()

    @property
    def current(self) -> QueueRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def row_count(self) -> int:
        return len(self.rows)

    def columns(self, width: int) -> list[_Col]:
        """The columns at ``width`` cells (cached until the rows or the width change)."""
        if self._columns is not None and self._columns[0] == width:
            return self._columns[1]
        cols = self._layout(width)
        self._columns = (width, cols)
        return cols

    def _layout(self, width: int) -> list[_Col]:
        idw = min(34, self._id_width + 1)
        cols = [_Col("", 2), _Col("task", idw + 1), _Col("kind", 13), _Col("backend", 8),
                _Col("claims", 20), _Col("reserved by", 14), _Col("disp", 5), _Col("my verdict", 12),
                _Col("screen", 7), _Col("failing", 20), _Col("screened", 13)]
        used = sum(c.width for c in cols)
        for name in ("screened", "failing"):  # the badge's detail goes before anything else
            if width < used:
                cols = [c for c in cols if c.title != name]
                used = sum(c.width for c in cols)
        if width - used >= 12:
            cols.append(_Col("title", width - used))
        elif width < used:
            # narrow terminal: task ids stay whole as long as anything else can give: shrink
            # claims, reserved, kind and my verdict to their floors, then drop backend and
            # disp (both also on the review screen and in the filter), and cut ids last
            over = used - width
            for name, floor in (("claims", 11), ("reserved by", 9), ("kind", 11), ("my verdict", 8)):
                over = _shrink(cols, name, floor, over)
            for name in ("backend", "disp"):
                if over > 0:
                    gone = next((c for c in cols if c.title == name), None)
                    if gone is not None:
                        cols.remove(gone)
                        over -= gone.width
            if over > 0:
                over = _shrink(cols, "task", 18, over)
            if over < 0 and width - sum(c.width for c in cols) >= 12:
                cols.append(_Col("title", width - sum(c.width for c in cols)))
        return cols

    def render_header(self, y: int, width: int) -> Strip:
        cols = self.columns(width)
        text = "".join(fit(_heading(c), c.width - 1) + " " for c in cols)
        return Strip([Segment(fit(text, width), self._style("cursorlist--header"))])

    def render_row(self, index: int, width: int, selected: bool) -> Strip:
        r = self.rows[index]
        s = r.summary
        mark = "▶" if selected else (("≠" if r.draft_outdated else "✎") if r.has_draft else " ")
        if not s.validated:
            mark = "…" if not selected else "▶"
        cells = {
            "": mark,
            "task": s.id,
            "kind": s.kind,
            "backend": s.backend,
            "claims": r.claimed_label,
            "reserved by": ("me" if r.reserved_by_me else r.reserved_by) or "-",
            "disp": f"⚑{r.open_disputes}" if r.open_disputes else "-",
            "my verdict": r.mine or "-",
            **_screen_cells(r.screen),
            "title": s.title,
        }
        text = "".join(fit(cells[c.title], c.width - 1) + " " for c in self.columns(width))
        style = self._style("cursorlist--cursor") if selected else Style()
        return Strip([Segment(fit(text, width), style)])


#: shorter headings for columns narrowed below their title (an 80-column terminal): a heading
#: is never cut mid-word
_SHORT = {"reserved by": ("reserved", "resv"), "my verdict": ("mine",), "claims": ("claim",),
          "kind": ("kind",), "backend": ("bknd",), "screened": ("when",)}


def _heading(col: _Col) -> str:
    """The column's title, or the longest short form that fits its width."""
    room = col.width - 1
    if cell_len(col.title) <= room:
        return col.title
    return next((t for t in _SHORT.get(col.title, ()) if cell_len(t) <= room), col.title)


_WORST_MARK = {"fail": "FAIL", "warn": "warn", "info": "info", "pass": "pass", "error": "ERROR", "timeout": "T/O",
               "not-judged": "N/J"}


def _screen_cells(badge: Any) -> dict[str, str]:
    """The pre-screen's three cells (``-`` when the task's version has none)."""
    if badge is None:
        return {"screen": "-", "failing": "", "screened": ""}
    failing = ",".join(badge.failing)
    if badge.errored:
        failing = (failing + " " if failing else "") + "err:" + ",".join(badge.errored)
    unjudged = [c for c in getattr(badge, "not_judged", ()) if c not in badge.errored]
    if unjudged:  # a task whose checks could not look is never shown as clean
        failing = (failing + " " if failing else "") + "nj:" + ",".join(unjudged)
    return {"screen": _WORST_MARK.get(badge.worst, badge.worst) + ("*" if badge.stale else ""),
            "failing": failing, "screened": f"{_age(badge.finished)} {badge.host.split(' ')[0]}".strip()}


def _age(iso: str) -> str:
    """``"2h"`` for an ISO 8601 time two hours ago (``""`` when it does not parse)."""
    from datetime import UTC, datetime

    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    secs = max(0, int((datetime.now(UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _shrink(cols: list[_Col], name: str, floor: int, over: int) -> int:
    """Narrow column ``name`` by up to ``over`` cells, not below ``floor``; the cells still over."""
    for i, c in enumerate(cols):
        if c.title == name and over > 0:
            cut = max(0, min(over, c.width - floor))
            cols[i] = _Col(c.title, c.width - cut)
            over -= cut
    return over
