"""Line diffs for the review screen's source viewer: rows for unified and split views,
hunks, word-level change spans, and syntax tokens.

Pure Python (difflib, pygments); no Textual. The viewer renders only the rows on screen,
so files of tens of thousands of lines stay responsive; everything here is computed once
per file pair.

Rows:

- unified view: one row per line; ``tag`` is ``" "`` (both sides), ``"-"`` (only in the
  old file), ``"+"`` (only in the new file);
- split view: one row per pair; a replaced block pairs old line i with new line i, the
  longer side's extra lines face blank cells.

Word-level spans mark, inside each paired changed line, the character ranges that differ
(tokens: identifiers and numbers, runs of spaces, single punctuation characters), so a
changed ``BLOCK_M = 64`` -> ``BLOCK_M = 128`` highlights only the number.
"""

from __future__ import annotations

import difflib
import re
from bisect import bisect_right
from dataclasses import dataclass, field

__all__ = [
    "FileDiff",
    "Hunk",
    "SplitRow",
    "UnifiedRow",
    "diff_files",
    "highlight_lines",
    "listing",
    "word_spans",
]

Span = tuple[int, int]
#: Lines longer than this get no word-level spans (the token diff is quadratic in the worst case).
WORD_DIFF_MAX_CHARS = 400

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass(frozen=True)
class UnifiedRow:
    """One unified-view row. ``old_no`` / ``new_no`` are 1-based line numbers (None where
    the line is absent on that side); ``spans`` the changed character ranges of ``text``."""

    tag: str
    old_no: int | None
    new_no: int | None
    text: str
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class SplitRow:
    """One split-view row: the old line (left) and the new line (right); either may be
    absent (None number, empty text). ``tag``: ``"equal"``, ``"delete"``, ``"insert"``,
    ``"replace"``."""

    tag: str
    old_no: int | None
    old_text: str
    new_no: int | None
    new_text: str
    old_spans: tuple[Span, ...] = ()
    new_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Hunk:
    """A block of changed lines: its first row in each view and its line ranges
    (``old_start``/``new_start`` 1-based, lengths may be 0)."""

    unified_row: int
    split_row: int
    old_start: int
    old_len: int
    new_start: int
    new_len: int

    def header(self) -> str:
        """``@@ -a,b +c,d @@`` as in ``diff -u``."""
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"


@dataclass
class FileDiff:
    """The diff of ``old`` -> ``new`` (``old`` None: a plain listing of ``new``)."""

    old_name: str | None
    new_name: str
    old_lines: list[str]
    new_lines: list[str]
    unified: list[UnifiedRow] = field(default_factory=list)
    split: list[SplitRow] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)
    _new_to_unified: list[int] = field(default_factory=list, repr=False)
    _old_to_unified: list[int] = field(default_factory=list, repr=False)
    _new_to_split: list[int] = field(default_factory=list, repr=False)
    _old_to_split: list[int] = field(default_factory=list, repr=False)

    @property
    def is_listing(self) -> bool:
        return self.old_name is None

    @property
    def added(self) -> int:
        return sum(1 for r in self.unified if r.tag == "+")

    @property
    def removed(self) -> int:
        return sum(1 for r in self.unified if r.tag == "-")

    def row_of_line(self, line: int, *, split: bool, side: str = "new") -> int | None:
        """The row index showing 1-based ``line`` of the ``side`` ("new"/"old") file."""
        table = {
            (False, "new"): self._new_to_unified,
            (False, "old"): self._old_to_unified,
            (True, "new"): self._new_to_split,
            (True, "old"): self._old_to_split,
        }[(split, side)]
        if 1 <= line <= len(table):
            return table[line - 1]
        return None

    def hunk_rows(self, *, split: bool) -> list[int]:
        """First row of each hunk in the chosen view, ascending."""
        return [h.split_row if split else h.unified_row for h in self.hunks]

    def next_hunk(self, row: int, *, split: bool, forward: bool = True) -> int | None:
        """The first row of the next (or previous) hunk after (before) ``row``."""
        rows = self.hunk_rows(split=split)
        if not rows:
            return None
        if forward:
            i = bisect_right(rows, row)
            return rows[i] if i < len(rows) else None
        i = bisect_right(rows, row - 1) - 1
        while i >= 0 and rows[i] >= row:
            i -= 1
        return rows[i] if i >= 0 else None


def _tokens(s: str) -> list[str]:
    return _TOKEN.findall(s)


def word_spans(old: str, new: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
    """Character ranges of ``old`` and ``new`` that differ, at token granularity.

    Lines longer than :data:`WORD_DIFF_MAX_CHARS` (or lines with nothing in common) give
    no spans: the whole line is marked changed by its row tag already.
    """
    if len(old) > WORD_DIFF_MAX_CHARS or len(new) > WORD_DIFF_MAX_CHARS:
        return (), ()
    a, b = _tokens(old), _tokens(new)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # similarity over non-blank text: shared whitespace alone does not make lines related
    same = sum(len("".join(a[i:i + n]).replace(" ", "")) for i, _j, n in sm.get_matching_blocks())
    total = max(len(old.replace(" ", "")), len(new.replace(" ", "")), 1)
    if same / total < 0.3:
        return (), ()
    pa = [0]
    for t in a:
        pa.append(pa[-1] + len(t))
    pb = [0]
    for t in b:
        pb.append(pb[-1] + len(t))
    so: list[Span] = []
    sn: list[Span] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if i2 > i1 and old[pa[i1]:pa[i2]].strip():
            so.append((pa[i1], pa[i2]))
        if j2 > j1 and new[pb[j1]:pb[j2]].strip():
            sn.append((pb[j1], pb[j2]))
    return tuple(so), tuple(sn)


def normalise(text: str) -> str:
    """Tabs expanded to 4 columns, ``\r\n`` and ``\r`` turned into ``\n``."""
    return text.expandtabs(4).replace("\r\n", "\n").replace("\r", "\n")


def _split_lines(text: str) -> list[str]:
    lines = normalise(text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def listing(text: str, name: str) -> FileDiff:
    """A plain listing of ``text`` (no baseline): every row is context."""
    lines = _split_lines(text)
    fd = FileDiff(None, name, [], lines)
    fd.unified = [UnifiedRow(" ", None, i + 1, s) for i, s in enumerate(lines)]
    fd.split = [SplitRow("equal", None, "", i + 1, s) for i, s in enumerate(lines)]
    fd._new_to_unified = list(range(len(lines)))
    fd._new_to_split = list(range(len(lines)))
    return fd


def diff_files(old_text: str | None, new_text: str, old_name: str | None, new_name: str) -> FileDiff:
    """The diff of two texts (``old_text`` None: :func:`listing`)."""
    if old_text is None:
        return listing(new_text, new_name)
    a, b = _split_lines(old_text), _split_lines(new_text)
    fd = FileDiff(old_name, new_name, a, b)
    fd._old_to_unified = [0] * len(a)
    fd._new_to_unified = [0] * len(b)
    fd._old_to_split = [0] * len(a)
    fd._new_to_split = [0] * len(b)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=len(a) + len(b) > 4000)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                fd._old_to_unified[i1 + k] = fd._new_to_unified[j1 + k] = len(fd.unified)
                fd.unified.append(UnifiedRow(" ", i1 + k + 1, j1 + k + 1, b[j1 + k]))
                fd._old_to_split[i1 + k] = fd._new_to_split[j1 + k] = len(fd.split)
                fd.split.append(SplitRow("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
            continue
        fd.hunks.append(Hunk(len(fd.unified), len(fd.split), i1 + 1 if i2 > i1 else i1,
                             i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1))
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        spans = [word_spans(a[i1 + k], b[j1 + k]) for k in range(pairs)]
        for k in range(i2 - i1):
            fd._old_to_unified[i1 + k] = len(fd.unified)
            fd.unified.append(UnifiedRow("-", i1 + k + 1, None, a[i1 + k], spans[k][0] if k < pairs else ()))
        for k in range(j2 - j1):
            fd._new_to_unified[j1 + k] = len(fd.unified)
            fd.unified.append(UnifiedRow("+", None, j1 + k + 1, b[j1 + k], spans[k][1] if k < pairs else ()))
        for k in range(max(i2 - i1, j2 - j1)):
            has_old, has_new = k < i2 - i1, k < j2 - j1
            tag = "replace" if has_old and has_new else ("delete" if has_old else "insert")
            if has_old:
                fd._old_to_split[i1 + k] = len(fd.split)
            if has_new:
                fd._new_to_split[j1 + k] = len(fd.split)
            fd.split.append(SplitRow(
                tag,
                i1 + k + 1 if has_old else None, a[i1 + k] if has_old else "",
                j1 + k + 1 if has_new else None, b[j1 + k] if has_new else "",
                spans[k][0] if k < pairs else (), spans[k][1] if k < pairs else (),
            ))
    return fd


def highlight_lines(text: str, filename: str) -> list[list[tuple[str, str]]]:
    """Syntax tokens of ``text`` per line: ``[[(token type, text), ...], ...]``, one list
    per line of the file (as :func:`diff_files` splits it). The token type is pygments' dotted
    name (``"Token.Keyword"``). Unknown file types give one plain token per line.

    The whole file is lexed at once (pygments needs the context of multi-line strings
    and comments), then cut at newlines.
    """
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    lines = _split_lines(text)
    lines_n = len(lines)
    try:
        lexer = get_lexer_for_filename(filename, stripnl=False, ensurenl=True)
    except ClassNotFound:
        return [[("Token.Text", s)] for s in lines]
    src = "\n".join(lines) + "\n"
    out: list[list[tuple[str, str]]] = [[]]
    for ttype, value in lexer.get_tokens(src):
        name = str(ttype)
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                out.append([])
            if part:
                out[-1].append((name, part))
    # ensurenl adds a trailing newline: drop the empty line it leaves, keep the line count
    return out[:lines_n] + [[] for _ in range(lines_n - len(out))]
