"""Guarded TOML reading: every TOML file kws reads goes through :func:`read_toml`.

A queue is shared through git, so one file written by someone else (a task, a verdict, a
dispute) must never crash a command that reads the whole queue: the guard turns every way a
file can be unreadable into one :class:`~workstation.schema.problem.Problem` naming it, so
the caller can skip it and load the rest.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from workstation.schema.problem import Problem

#: default cap on a TOML file's size (bytes): task.toml, queue.toml, rubrics, keymaps.
MAX_BYTES = 1 << 20
#: default cap on table/array nesting: kws's own files nest at most 5 levels.
MAX_DEPTH = 32


def parse_toml(text: str, file: Path | str, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse TOML ``text`` (from ``file``, for messages) under the depth guard.

    Raises:
        Problem: not valid TOML, or nested deeper than ``max_depth`` (tomllib recurses per
            level, so a deeply nested value would otherwise raise ``RecursionError`` here or
            in any code that walks the result).
    """
    depth = bracket_depth(text)
    if depth > max_depth:
        raise Problem(file, "", f"arrays or inline tables nested {depth} levels deep (at most {max_depth})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise Problem(file, "", f"not valid TOML: {e}") from None
    except RecursionError:
        raise Problem(file, "", f"nested too deeply to parse (at most {max_depth} levels)") from None
    key, depth = _deepest(data, max_depth)
    if depth > max_depth:
        raise Problem(file, key, f"nested more than {max_depth} levels deep")
    return data


def bracket_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in ``text`` outside strings and comments (table
    headers count as one level), found without parsing: deep nesting is refused before
    tomllib's recursive descent can hit Python's recursion limit."""
    depth = best = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _string_end(text, i)
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return best


def _string_end(text: str, i: int) -> int:
    """The index just past the TOML string that opens at ``text[i]`` (a ``"`` or ``'``,
    single or triple; an unterminated single-line string ends at its line's end)."""
    c, n = text[i], len(text)
    triple = text.startswith(c * 3, i)
    quote = c * 3 if triple else c
    j = i + len(quote)
    while j < n:
        if c == '"' and text[j] == "\\":
            j += 2
            continue
        if text.startswith(quote, j):
            break
        if not triple and text[j] == "\n":
            break
        j += 1
    return j + len(quote)


def read_toml(path: Path | str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Read and parse the TOML file at ``path`` under the guards.

    Raises:
        Problem: the file cannot be read, is larger than ``max_bytes``, is not UTF-8 (the
            message names the first invalid byte and its offset), is not valid TOML, or
            nests deeper than ``max_depth``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise Problem(path, "", _too_large(size, max_bytes))
        raw = path.read_bytes()
    except OSError as e:
        raise Problem(path, "", f"cannot read: {e.strerror or e}") from None
    return parse_toml_bytes(raw, path, max_bytes=max_bytes, max_depth=max_depth)


def parse_toml_bytes(raw: bytes, file: Path | str, *, max_bytes: int = MAX_BYTES,
                     max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse the bytes of a TOML file (read from disk, or a git blob of a commit's tree)
    under the guards; ``file`` names it in messages.

    Raises:
        Problem: ``raw`` is longer than ``max_bytes``, is not UTF-8 (the message names the
            first invalid byte and its offset), is not valid TOML, or nests deeper than
            ``max_depth``.
    """
    if len(raw) > max_bytes:
        raise Problem(file, "", _too_large(len(raw), max_bytes))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Problem(file, "", f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    return parse_toml(text, file, max_depth=max_depth)


def _too_large(size: int, max_bytes: int) -> str:
    return f"{size} bytes, larger than the {max_bytes}-byte limit for this file"


def _deepest(data: Any, limit: int) -> tuple[str, int]:
    """(dotted key, depth) of the most deeply nested value, without recursion; stops
    descending once ``limit`` is exceeded."""
    best_key, best = "", 0
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        if depth > best:
            best_key, best = key, depth
            if best > limit:
                break
        if isinstance(value, dict):
            stack.extend((v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value))
    return best_key, best
