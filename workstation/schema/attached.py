"""Guarded reading of attached files: profiles and other evidence a task ships as data.

An attached file (a profiler export listed in task.toml) is untrusted input like the rest
of a queue, and it is usually written by a tool, not by hand: large, nested, sometimes
truncated. Every reader here turns the ways such a file can be unusable into one
:class:`~workstation.schema.problem.Problem` (file, key, problem), so the caller reports
it and goes on:

- :func:`read_bytes`: a size cap checked before and while reading (a file that grows
  past the cap while it is read is refused too);
- :func:`parse_json`: UTF-8 (the offending byte named), a nesting-depth guard applied
  before parsing (Python's ``json`` recurses per level), non-finite literals refused;
- :func:`read_csv_rows`: a cap on rows, fields per row and field size (``csv``'s own
  field limit), comment/log lines before the header skipped (``==PROF==`` lines of
  ``ncu --log-file``);
- :func:`open_sqlite`: a read-only, immutable connection with SQLite's defences on
  (``trusted_schema`` off, ``cell_size_check`` on, length and SQL limits, a progress
  handler that bounds each query's work, ``quick_check`` before the first query), per
  SQLite's "Defense against the dark arts" (https://sqlite.org/security.html).

Standard library only (the bottom layer).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workstation.schema.problem import Problem

#: default cap on an attached file's size (bytes).
MAX_ATTACHED_BYTES = 64 << 20
#: default nesting cap of an attached JSON document (a Chrome trace nests 4-6 levels, a
#: proton tree one level per call-path frame).
MAX_JSON_DEPTH = 256
#: default caps of an attached CSV file.
MAX_CSV_ROWS = 500_000
MAX_CSV_FIELDS = 4096
MAX_CSV_FIELD_BYTES = 1 << 20
#: SQLite virtual-machine instructions one query may execute before it is interrupted.
SQLITE_MAX_STEPS = 200_000_000


def read_bytes(path: Path | str, *, max_bytes: int = MAX_ATTACHED_BYTES, key: str = "") -> bytes:
    """The bytes of ``path``, at most ``max_bytes``.

    Raises:
        Problem: the file is missing or unreadable, or larger than ``max_bytes`` (checked
            with ``stat`` first and again while reading).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise Problem(path, key, f"{size} bytes, larger than the {max_bytes}-byte limit for an attached file")
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise Problem(path, key, f"cannot read: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        raise Problem(path, key, f"grew past the {max_bytes}-byte limit for an attached file while it was read")
    return raw


def decode_utf8(raw: bytes, file: Path | str, key: str = "") -> str:
    """``raw`` as text (a UTF-8 BOM dropped).

    Raises:
        Problem: not UTF-8 (the message names the first invalid byte and its offset).
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Problem(file, key, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})") from None


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON ``text`` outside strings, found
    without parsing (so a deeply nested file is refused before ``json`` recurses)."""
    depth = best = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > best:
                best = depth
        elif c in "]}":
            depth -= 1
    return best


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON literal {name}")


def parse_json(raw: bytes | str, file: Path | str, *, max_depth: int = MAX_JSON_DEPTH, key: str = "") -> Any:
    """Parse an attached JSON document under the guards.

    Raises:
        Problem: not UTF-8, nested deeper than ``max_depth``, not valid JSON (the message
            gives the line and column), or using ``NaN``/``Infinity`` literals.
    """
    text = decode_utf8(raw, file, key) if isinstance(raw, bytes) else raw
    depth = json_depth(text)
    if depth > max_depth:
        raise Problem(file, key, f"JSON nested {depth} levels deep (at most {max_depth})")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise Problem(file, key, f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except ValueError as e:
        raise Problem(file, key, f"not valid JSON: {e}") from None
    except RecursionError:
        raise Problem(file, key, "JSON nested too deeply to parse") from None


def read_csv_rows(raw: bytes | str, file: Path | str, *, header_starts: tuple[str, ...] = (),
                  max_rows: int = MAX_CSV_ROWS, max_fields: int = MAX_CSV_FIELDS,
                  max_field_bytes: int = MAX_CSV_FIELD_BYTES, key: str = "") -> list[list[str]]:
    """The rows of an attached CSV file, from its header on.

    ``header_starts``: when given, lines before the first line whose first field is one
    of these are skipped (tool log lines such as ``==PROF== Connected to process``).

    Raises:
        Problem: not UTF-8, not CSV, no header line found, more than ``max_rows`` rows,
            a row with more than ``max_fields`` fields, or a field over ``max_field_bytes``.
    """
    text = decode_utf8(raw, file, key) if isinstance(raw, bytes) else raw
    lines = text.splitlines(keepends=True)
    start = 0
    if header_starts:
        for i, line in enumerate(lines):
            first = next(csv.reader([line]), [""])
            if first and first[0].strip() in header_starts:
                start = i
                break
        else:
            raise Problem(file, key, f"no CSV header line (one starting with {', '.join(map(repr, header_starts))})")
    old = csv.field_size_limit()
    rows: list[list[str]] = []
    try:
        csv.field_size_limit(max_field_bytes)
        for row in csv.reader(io.StringIO("".join(lines[start:]))):
            if len(row) > max_fields:
                raise Problem(file, key, f"row {len(rows) + 1}: {len(row)} fields (at most {max_fields})")
            rows.append(row)
            if len(rows) > max_rows:
                raise Problem(file, key, f"more than {max_rows} rows")
    except csv.Error as e:
        raise Problem(file, key, f"not valid CSV at row {len(rows) + 1}: {e}") from None
    finally:
        csv.field_size_limit(old)
    return rows


@contextlib.contextmanager
def open_sqlite(path: Path | str, *, max_bytes: int = MAX_ATTACHED_BYTES, max_steps: int = SQLITE_MAX_STEPS,
                key: str = "") -> Iterator[sqlite3.Connection]:
    """A read-only connection to an attached SQLite database, closed after the block.

    The file is opened ``mode=ro&immutable=1`` (nothing is written, no journal or lock
    file is created next to it), with ``trusted_schema`` off (functions in views and
    triggers of the file cannot run), ``cell_size_check`` on, SQLite's length and SQL
    length limits lowered, and a progress handler that interrupts a query after
    ``max_steps`` virtual-machine steps; ``PRAGMA quick_check`` runs first.

    Raises:
        Problem: the file is too large, missing, not an SQLite database, or fails the
            integrity check. (An interrupted query raises ``sqlite3.OperationalError``
            inside the block; :func:`sqlite_query` turns it into a Problem.)
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise Problem(path, key, f"cannot read: {e.strerror or e}") from None
    if size > max_bytes:
        raise Problem(path, key, f"{size} bytes, larger than the {max_bytes}-byte limit for an attached file")
    with path.open("rb") as f:
        head = f.read(16)
    if head != b"SQLite format 3\x00":
        raise Problem(path, key, "not an SQLite 3 database (no 'SQLite format 3' header)")
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise Problem(path, key, f"cannot open as SQLite: {e}") from None
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1 << 24)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1 << 16)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        steps = [0]

        def progress() -> int:
            steps[0] += 1000
            return 1 if steps[0] > max_steps else 0

        conn.set_progress_handler(progress, 1000)
        try:
            conn.execute("PRAGMA trusted_schema = OFF")
            conn.execute("PRAGMA cell_size_check = ON")
            check = conn.execute("PRAGMA quick_check").fetchone()
        except sqlite3.Error as e:
            raise Problem(path, key, f"not a usable SQLite database: {e}") from None
        if not check or check[0] != "ok":
            raise Problem(path, key, f"fails SQLite's integrity check: {check[0] if check else 'no answer'}")
        steps[0] = 0
        yield conn
    finally:
        conn.close()


def sqlite_query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], file: Path | str,
                 key: str = "") -> list[tuple[Any, ...]]:
    """Rows of one query on an :func:`open_sqlite` connection.

    Raises:
        Problem: the query failed or was interrupted by the work bound.
    """
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as e:
        raise Problem(file, key, f"SQLite query failed ({e}): {sql.split(' FROM ')[-1][:80]}") from None


def sqlite_tables(conn: sqlite3.Connection, file: Path | str) -> dict[str, list[str]]:
    """Table name -> column names of an :func:`open_sqlite` database (tables only: views
    and triggers are never read)."""
    out: dict[str, list[str]] = {}
    for (name,) in sqlite_query(conn, "SELECT name FROM sqlite_master WHERE type = 'table'", (), file):
        if isinstance(name, str) and name.replace("_", "").isalnum():
            cols = sqlite_query(conn, f'PRAGMA table_info("{name}")', (), file)
            out[name] = [str(c[1]) for c in cols]
    return out
