"""The line protocol of kws's control pipes (fork server, check server): one JSON object
per line. Standard library only, so the review app may read it without numpy."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def json_lines(stream: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a line-oriented control pipe (fork server, check server): one
    object per line; blank lines, lines that are not JSON and JSON that is not an object
    are skipped (a child's stray print must not break the reader)."""
    for line in stream:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            yield msg
