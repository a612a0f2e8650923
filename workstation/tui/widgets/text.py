"""Text helpers the widgets share: fit text to a width, update a Static only when its
content changes, and a two-column grid of labelled lines."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

__all__ = ["fit", "label_grid", "set_static", "unpushed_part"]


def fit(text: str, width: int) -> str:
    """``text`` cut (with "…") or padded with spaces to exactly ``width`` cells."""
    if width <= 0:
        return ""
    n = cell_len(text)
    if n <= width:
        return text + " " * (width - n)
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…" + " " * (width - 1 - used)


def set_static(widget: Static, content: Any, key: Any = None) -> None:
    """``widget.update(content)`` unless it already shows the same thing (``key``; for a
    string, the string itself). Every update of a Static re-lays the whole screen out,
    so periodic status lines and per-keystroke hints update only when they change."""
    k = key if key is not None else (content if isinstance(content, str) else (
        content.plain, tuple(content.spans)) if isinstance(content, Text) else None)
    if k is not None and getattr(widget, "_kws_key", None) == k:
        return
    widget._kws_key = k  # type: ignore[attr-defined]  # kws's own marker on Textual's widget
    widget.update(content)


def label_grid(lines: list[tuple[str, str]]) -> Table:
    """``(label, text)`` lines as a grid: bold labels, text folded to the width."""
    t = Table.grid(padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for label, value in lines:
        t.add_row(label, Text(value))
    return t


def unpushed_part(q: Any) -> list[str]:
    """The title bars' "N records not pushed" (record commits of this clone its remote
    lacks, counted in the records worker: ``QueueState.unpushed``), or nothing."""
    n = int(getattr(q, "unpushed", 0) or 0)
    return [f"{n} records not pushed"] if n > 0 else []
