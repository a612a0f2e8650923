"""The source viewer: a diff (unified or split) or a plain listing, with line numbers,
``+``/``-`` markers, syntax colours and word-level change highlights.

Virtualised (Textual's Line API): :meth:`SourceView.render_line` renders only the rows on
screen, from rows computed once by :mod:`workstation.review.diff`; rendered strips are
cached per row, so scrolling a 20,000-line diff costs the same as a 20-line one.

Markers carry the meaning without colour: ``-`` / ``+`` in the gutter, changed words in
bold underline, the line a finding points at with ``▶`` in the gutter.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workstation.review.diff import FileDiff, SplitRow, UnifiedRow
from workstation.tui.keymap import bindings_for
from workstation.tui.widgets.text import fit

Tokens = list[list[tuple[str, str]]]

_ADD_BG = Style(bgcolor="#143d1e")
_DEL_BG = Style(bgcolor="#4a1a1c")
_ADD_WORD = Style(bgcolor="#2a7a3c", bold=True, underline=True)
_DEL_WORD = Style(bgcolor="#8a2c30", bold=True, underline=True)
_GUTTER = Style(dim=True)
_TARGET = Style(reverse=True, bold=True)
_MARK_ADD = Style(color="green", bold=True)
_MARK_DEL = Style(color="red", bold=True)


class SourceView(ScrollView, can_focus=True, inherit_bindings=False):
    """Shows one :class:`~workstation.review.diff.FileDiff`.

    ``split`` toggles the side-by-side view; ``hscroll`` shifts the text (not the
    gutters) left. Syntax tokens (:func:`workstation.review.diff.highlight_lines`) may
    arrive later (:meth:`set_tokens`): until then lines are plain.
    """

    DEFAULT_CSS = """
    SourceView { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    """
    BINDINGS = bindings_for("diff")

    split: reactive[bool] = reactive(False)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.diff: FileDiff | None = None
        self.old_tokens: Tokens | None = None
        self.new_tokens: Tokens | None = None
        self.target: tuple[str, int] | None = None  # (side, line) a finding points at
        self.hscroll = 0
        self._theme = Syntax.get_theme("ansi_dark")
        self._token_styles: dict[str, Style] = {}
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()

    # -- content -------------------------------------------------------------------------

    def set_diff(self, diff: FileDiff, old_tokens: Tokens | None = None, new_tokens: Tokens | None = None) -> None:
        self.diff = diff
        self.old_tokens, self.new_tokens = old_tokens, new_tokens
        self.target = None
        self.hscroll = 0
        self._cache.clear()
        self._resize_virtual()
        self.scroll_to(y=0, animate=False)
        self.refresh()

    def set_tokens(self, old_tokens: Tokens | None, new_tokens: Tokens | None) -> None:
        self.old_tokens, self.new_tokens = old_tokens, new_tokens
        self._cache.clear()
        self.refresh()

    @property
    def rows(self) -> list[Any]:
        if self.diff is None:
            return []
        return self.diff.split if self.split else self.diff.unified

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))

    def on_resize(self) -> None:
        self._cache.clear()
        self._resize_virtual()
        if self.target is not None and self.diff is not None:
            row = self.diff.row_of_line(self.target[1], split=self.split, side=self.target[0])
            top = int(self.scroll_offset.y)
            if row is not None and not top <= row < top + self.size.height:
                self.scroll_to(y=max(0, row - self.size.height // 3), animate=False)

    def watch_split(self) -> None:
        self._cache.clear()
        top = self.top_row()
        self._resize_virtual()
        self.refresh()
        if top is not None and self.diff is not None:
            # keep the same new-file line at the top across views
            r = self.rows_in(not self.split)[top] if top < len(self.rows_in(not self.split)) else None
            if r is not None:
                line = r.new_no if r.new_no is not None else r.old_no
                side = "new" if r.new_no is not None else "old"
                if line is not None:
                    row = self.diff.row_of_line(line, split=self.split, side=side)
                    if row is not None:
                        self.scroll_to(y=row, animate=False)

    def rows_in(self, split: bool) -> list[Any]:
        if self.diff is None:
            return []
        return self.diff.split if split else self.diff.unified

    def top_row(self) -> int | None:
        return int(self.scroll_offset.y) if self.diff is not None else None

    # -- navigation ------------------------------------------------------------------------

    def jump_to_line(self, line: int, side: str = "new") -> bool:
        """Centre the row showing ``line`` of the ``side`` file and mark it; False when
        the file has no such line."""
        if self.diff is None:
            return False
        row = self.diff.row_of_line(line, split=self.split, side=side)
        if row is None:
            return False
        self.target = (side, line)
        self._cache.clear()
        self.scroll_to(y=max(0, row - self.size.height // 3), animate=False)
        self.refresh()
        return True

    def action_next_hunk(self) -> None:
        self._hunk(True)

    def action_prev_hunk(self) -> None:
        self._hunk(False)

    def _hunk(self, forward: bool) -> None:
        if self.diff is None:
            return
        top = int(self.scroll_offset.y)
        row = self.diff.next_hunk(top, split=self.split, forward=forward)
        if row is None:
            self.app.bell()
            return
        self.scroll_to(y=row, animate=False)

    def current_hunk(self) -> int | None:
        """1-based index of the hunk at or above the top row, or None."""
        if self.diff is None or not self.diff.hunks:
            return None
        top = int(self.scroll_offset.y)
        rows = self.diff.hunk_rows(split=self.split)
        idx = None
        for i, r in enumerate(rows):
            if r <= top:
                idx = i + 1
        return idx

    def action_toggle_view(self) -> None:
        self.split = not self.split

    def action_scroll_lines(self, n: int) -> None:
        self.scroll_to(y=max(0, int(self.scroll_offset.y) + n), animate=False)

    def action_scroll_pages(self, n: int) -> None:
        self.action_scroll_lines(n * max(1, self.size.height - 1))

    def action_scroll_to_top(self) -> None:
        self.scroll_to(y=0, animate=False)

    def action_scroll_to_bottom(self) -> None:
        self.scroll_to(y=max(0, len(self.rows) - self.size.height), animate=False)

    def action_next_file(self) -> None:
        # handled by the diff panel, which owns the list of files
        self.post_message(NextFile())

    def action_scroll_columns(self, n: int) -> None:
        """Shift the text (not the gutters) ``n`` columns right (negative: left)."""
        self.hscroll = max(0, self.hscroll + n)
        self._cache.clear()
        self.refresh()

    # -- rendering -------------------------------------------------------------------------

    def _tok_style(self, ttype: str) -> Style:
        st = self._token_styles.get(ttype)
        if st is None:
            from pygments.token import string_to_tokentype

            st = self._theme.get_style_for_token(string_to_tokentype(ttype))
            st = Style(color=st.color, bold=st.bold, italic=st.italic)
            self._token_styles[ttype] = st
        return st

    def _text_segments(self, text: str, tokens: list[tuple[str, str]] | None, spans: tuple, base: Style,
                       word: Style, width: int) -> list[Segment]:
        """``text`` from column ``hscroll``, ``width`` cells, coloured by ``tokens``, with
        ``spans`` (changed words) in ``word`` style, over background ``base``."""
        pieces: list[tuple[str, Style]] = []
        if tokens:
            pos = 0
            for ttype, value in tokens:
                pieces.append((value, self._tok_style(ttype)))
                pos += len(value)
            if pos < len(text):
                pieces.append((text[pos:], Style()))
        else:
            pieces.append((text, Style()))
        # cut pieces at span boundaries, apply the word style inside spans
        out: list[tuple[str, Style]] = []
        pos = 0
        for value, st in pieces:
            start = pos
            end = pos + len(value)
            cuts = sorted({start, end} | {b for s in spans for b in s if start < b < end})
            for a, b in zip(cuts, cuts[1:], strict=False):
                inside = any(s0 <= a and b <= s1 for s0, s1 in spans)
                out.append((value[a - start:b - start], base + st + (word if inside else Style())))
            pos = end
        # horizontal scroll and width
        segs: list[Segment] = []
        skip, room = self.hscroll, width
        for value, st in out:
            if skip >= len(value):
                skip -= len(value)
                continue
            value, skip = value[skip:], 0
            if len(value) > room:
                value = value[:room]
            if value:
                segs.append(Segment(value, st))
                room -= len(value)
            if room <= 0:
                break
        if room > 0:
            segs.append(Segment(" " * room, base))
        return segs

    def _gutter_width(self) -> int:
        d = self.diff
        n = max(len(d.old_lines), len(d.new_lines)) if d else 0
        return max(3, len(str(n)))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        index = int(self.scroll_offset.y) + y
        rows = self.rows
        if self.diff is None or index >= len(rows):
            return Strip.blank(width, self.rich_style)
        key = (index, self.split, width, self.hscroll, self.target, self.old_tokens is not None)
        strip = self._cache.get(key)
        if strip is None:
            row = rows[index]
            strip = self._render_split(row, width) if self.split else self._render_unified(row, width)
            strip = strip.apply_style(self.rich_style)  # a style on every segment (NO_COLOR filter)
            self._cache[key] = strip
            if len(self._cache) > 2000:
                self._cache.popitem(last=False)
        return strip

    def _num(self, n: int | None, gw: int, side: str) -> Segment:
        is_target = self.target is not None and self.target == (side, n)
        if is_target:
            return Segment(f"▶{n:>{gw}}" if n is not None else " " * (gw + 1), _TARGET)
        return Segment(f" {n:>{gw}}" if n is not None else " " * (gw + 1), _GUTTER)

    def _render_unified(self, row: UnifiedRow, width: int) -> Strip:
        gw = self._gutter_width()
        listing = self.diff is not None and self.diff.is_listing
        segs: list[Segment] = []
        if not listing:
            segs.append(self._num(row.old_no, gw, "old"))
        segs.append(self._num(row.new_no, gw, "new"))
        if row.tag == "+":
            base, word, mark = _ADD_BG, _ADD_WORD, Segment(" + ", _MARK_ADD + _ADD_BG)
            toks = self.new_tokens[row.new_no - 1] if self.new_tokens and row.new_no else None
        elif row.tag == "-":
            base, word, mark = _DEL_BG, _DEL_WORD, Segment(" - ", _MARK_DEL + _DEL_BG)
            toks = self.old_tokens[row.old_no - 1] if self.old_tokens and row.old_no else None
        else:
            base, word, mark = Style(), Style(), Segment(" │ " if listing else "   ", _GUTTER)
            toks = self.new_tokens[row.new_no - 1] if self.new_tokens and row.new_no else None
        segs.append(mark)
        used = sum(s.cell_length for s in segs)
        segs += self._text_segments(row.text, toks, row.spans, base, word, max(0, width - used))
        return Strip(segs, width)

    def _render_split(self, row: SplitRow, width: int) -> Strip:
        gw = self._gutter_width()
        half = max(10, (width - 1) // 2)
        text_w = max(0, half - gw - 4)
        segs: list[Segment] = []
        # left: old
        if row.old_no is not None:
            base = _DEL_BG if row.tag in ("replace", "delete") else Style()
            mark = Segment(" - ", _MARK_DEL + base) if row.tag in ("replace", "delete") else Segment("   ")
            toks = self.old_tokens[row.old_no - 1] if self.old_tokens else None
            segs += [self._num(row.old_no, gw, "old"), mark]
            segs += self._text_segments(row.old_text, toks, row.old_spans, base, _DEL_WORD, text_w)
        else:
            segs.append(Segment(fit("", half), Style(dim=True)))
        segs.append(Segment("│", _GUTTER))
        right_w = width - half - 1
        if row.new_no is not None:
            base = _ADD_BG if row.tag in ("replace", "insert") else Style()
            mark = Segment(" + ", _MARK_ADD + base) if row.tag in ("replace", "insert") else Segment("   ")
            toks = self.new_tokens[row.new_no - 1] if self.new_tokens else None
            segs += [self._num(row.new_no, gw, "new"), mark]
            segs += self._text_segments(row.new_text, toks, row.new_spans, base, _ADD_WORD, max(0, right_w - gw - 4))
        return Strip(segs, width).crop(0, width)


class NextFile(Message):
    """The reviewer asked for the next file of the task in the source viewer."""
