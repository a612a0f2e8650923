"""What must never reach a shared record: machine-local paths and credentials.

Records are read by other reviewers on other machines, a month later. Before anything is
written to a record (:mod:`workstation.records.store`), the text a check produced is
passed through :func:`scrub_text` (and nested evidence through :func:`scrub_value`):

- **credentials** are replaced by ``<redacted ...>``: token formats with a fixed prefix
  (GitHub ``ghp_`` / ``gho_`` / ``ghu_`` / ``ghs_`` / ``ghr_`` and ``github_pat_``, GitLab
  ``glpat-``, Slack ``xoxb-`` / ``xoxa-`` / ``xoxp-`` / ``xoxr-`` / ``xoxs-``, OpenAI-style
  ``sk-``, AWS access key ids ``AKIA`` / ``ASIA``, Google API keys ``AIza``), PEM private-key
  blocks (``-----BEGIN ... PRIVATE KEY-----``), and the value of ``NAME=value`` /
  ``NAME: value`` pairs whose name has a secret-looking part (TOKEN, SECRET, PASSWORD,
  PASSWD, API_KEY, ACCESS_KEY, PRIVATE_KEY, CREDENTIAL(S), AUTH);
- **machine-local paths** are rewritten: the queue root to ``<queue>``, the running
  Python's environment (``sys.prefix``: the venv) to ``<venv>``, its base installation to
  ``<python>``, the temporary folder to ``<tmp>``, the user's home to ``~``.

This is a second line of defence behind the sandbox (task code cannot read the reviewer's
environment there); the prefix formats are the vendors' published ones (GitHub, "About
authentication to GitHub: GitHub's token formats"; GitLab, "Personal access tokens";
Slack, "Token types"; AWS, "IAM identifiers: unique ID prefixes").
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["relative_repro", "scrub_secrets", "scrub_text", "scrub_value"]

_TOKENS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35})"
)
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
_ASSIGN = re.compile(r"(?P<name>\b[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*)(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;'\"]+)")
_SECRET_PART = re.compile(
    r"(?:^|[_.-])(?:TOKEN|SECRET|PASSWORD|PASSWD|APIKEY|API[_.-]KEY|ACCESS[_.-]KEY|PRIVATE[_.-]KEY|CREDENTIALS?|AUTH)"
    r"(?:$|[_.-])")


def scrub_secrets(text: str) -> str:
    """``text`` with credential-looking values replaced by ``<redacted ...>``."""
    text = _PEM.sub("<redacted private key>", text)
    text = _TOKENS.sub("<redacted token>", text)

    def assign(m: re.Match[str]) -> str:
        if not _SECRET_PART.search(m.group("name").upper()) or m.group("value").strip("\"'") in ("", "<redacted>"):
            return m.group(0)
        return f"{m.group('name')}{m.group('sep')}<redacted>"

    return _ASSIGN.sub(assign, text)


def _prefixes(queue_root: Path | str | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if queue_root is not None:
        out.append((str(Path(queue_root).resolve()), "<queue>"))
        out.append((str(Path(queue_root)), "<queue>"))
    for p, name in ((sys.prefix, "<venv>"), (sys.base_prefix, "<python>"), (tempfile.gettempdir(), "<tmp>"),
                    (os.path.expanduser("~"), "~")):
        if p:
            out.append((p, name))
            out.append((os.path.realpath(p), name))
    # longest first, so a venv inside the home is <venv>, not ~/...; never a bare "/"
    uniq = {p.rstrip("/"): n for p, n in out if len(p.rstrip("/")) > 1}
    return sorted(uniq.items(), key=lambda kv: -len(kv[0]))


def scrub_text(text: str, queue_root: Path | str | None = None) -> str:
    """``text`` with credentials redacted and machine-local path prefixes rewritten (see
    the module docstring)."""
    text = scrub_secrets(text)
    for prefix, name in _prefixes(queue_root):
        if prefix in text:
            text = re.sub(re.escape(prefix) + r"(?![A-Za-z0-9_.-])", _literal(name), text)
    return text


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that puts ``text`` as it is (no backslash escapes)."""
    return lambda _m: text


def scrub_value(value: Any, queue_root: Path | str | None = None) -> Any:
    """:func:`scrub_text` applied to every string in a JSON-like ``value`` (keys too)."""
    if isinstance(value, str):
        return scrub_text(value, queue_root)
    if isinstance(value, Mapping):
        return {scrub_text(str(k), queue_root): scrub_value(v, queue_root) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(v, queue_root) for v in value]
    return value


def relative_repro(repro: str, queue_root: Path | str | None) -> str:
    """A ``kws check <task dir> ...`` command with the task folder made relative to the
    queue root (``tasks/<id>``), so it runs from any clone's root; anything else scrubbed
    as text."""
    import shlex

    try:
        argv = shlex.split(repro)
    except ValueError:
        return scrub_text(repro, queue_root)
    if queue_root is not None and len(argv) >= 3 and argv[:2] == ["kws", "check"]:
        task = Path(argv[2])
        root = Path(queue_root)
        if task.is_absolute():
            for t, base in ((task, root), (task.resolve(), root.resolve())):
                try:
                    argv[2] = t.relative_to(base).as_posix()
                    break
                except ValueError:
                    continue
        return scrub_text(shlex.join(argv), queue_root)
    return scrub_text(repro, queue_root)
