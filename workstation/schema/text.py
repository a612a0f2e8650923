"""The one sanitizer for task-derived text: what task code or a queue wrote, made safe to
store, print and commit.

Text that task code produced (its stdout and stderr tails, an exception's type and
message, a traceback) or that a queue's files hold (a task's title and spec, evidence
strings) is untrusted: printed raw on the reviewer's terminal, an escape sequence could
write the clipboard (OSC 52), plant a link (OSC 8), retitle the window (OSC 0), move the
cursor over what kws printed (CSI), or act through a C1 byte (U+009B is a CSI on its own);
and a text of megabytes makes a report unreadable and a verdict uncommittable (the record
limit, :data:`workstation.records.format.MAX_RECORD_BYTES`).

:func:`safe_text` therefore shows every control character visibly escaped, as text:
C0 (U+0000–U+001F) except newline and tab, DEL (U+007F), C1 (U+0080–U+009F), the Unicode
bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069, which reorder what is
shown) and lone surrogates (which no UTF-8 file can hold). ESC becomes the four characters
``\\x1b``, so an OSC 52 sequence reads ``\\x1b]52;c;...\\x07``, harmless and visible. A
text longer than the limit keeps its start and ends with ``…[1.5 MB, sha256 ab12cd34ef56]``:
its whole size (UTF-8 bytes) and the start of the SHA-256 of the whole, so two long texts
can still be told apart. Backslashes already in the text are left as they are (a path or a
regular expression stays readable); the escapes are for a reader, not to be decoded.

:func:`safe_tree` applies it to every string (and every key) of a JSON-like value. Apply
them where task-derived text enters kws's data (the engine's call outcomes, the report, a
record), not where it is shown: every later reader then holds safe text.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

#: The longest text kept by default (characters) before it is cut with a size and hash.
DEFAULT_LIMIT = 20_000

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KB"
    return f"{n} B"


def safe_text(text: object, limit: int | None = DEFAULT_LIMIT) -> str:
    """``text`` (``str(text)`` when not a string) with control characters escaped and
    cut to at most about ``limit`` characters.

    Args:
        text: the untrusted text.
        limit: the most characters of the escaped text kept (``None``: no cut). A cut text
            ends with ``…[<size of the whole>, sha256 <12 hex digits of the whole>]``
            (about 40 characters more).

    Returns:
        A string with no C0 control character other than ``\\n`` and ``\\t``, no DEL, no C1
        character, no bidirectional override and no lone surrogate. Idempotent for texts
        within the limit.
    """
    s = text if isinstance(text, str) else str(text)
    out = _UNSAFE.sub(_escape, s)
    if limit is None or len(out) <= limit:
        return out
    whole = s.encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(whole).hexdigest()[:12]
    return f"{out[:limit]}…[{_size(len(whole))}, sha256 {digest}]"


def safe_tree(obj: Any, limit: int | None = DEFAULT_LIMIT) -> Any:
    """``obj`` (dicts, lists, tuples, scalars) with :func:`safe_text` applied to every
    string value (cut at ``limit``) and every dict key (cut at 200 characters); other
    values are returned as they are. Tuples become lists (as in JSON)."""
    if isinstance(obj, str):
        return safe_text(obj, limit)
    if isinstance(obj, dict):
        return {safe_text(k, 200) if isinstance(k, str) else k: safe_tree(v, limit) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [safe_tree(v, limit) for v in obj]
    return obj
