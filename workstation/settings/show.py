"""The settings in words: the rows of ``kws config`` (effective values, with their source)
and the Markdown table of the declarations that docs/settings.md carries (``kws config
--markdown`` prints it; tests/test_settings.py checks the document against it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workstation.settings.declared import SETTINGS, Setting
from workstation.settings.load import Settings


def _bytes_words(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n} ({n / (1 << shift):.4g} {unit})"
    return str(n)


def value_text(s: Setting, value: Any) -> str:
    """``value`` of setting ``s`` as ``kws config`` prints it (``None``: the words of its
    default, kws decides)."""
    if value is None:
        return f"auto: {s.default_text}"
    if isinstance(value, bool):
        return "1 (on)" if value else "0 (off)"
    if s.unit == "bytes" and isinstance(value, int):
        return _bytes_words(value)
    if isinstance(value, tuple):
        return os.pathsep.join(str(p) for p in value) or "(none)"
    if s.name == "bwrap" and value == "":
        return '"" (none)'
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def rows(settings: Settings) -> list[dict[str, Any]]:
    """One dict per setting, in declaration order: ``name``, ``env``, ``key`` (or None),
    ``value`` (JSON-ready: folders as strings, ``None`` when kws decides), ``text`` (the
    value in words), ``unit``, ``default`` (in words), ``source``, ``meaning``."""
    out = []
    for s in SETTINGS:
        v = getattr(settings, s.name)
        out.append({"name": s.name, "env": s.env, "key": s.key, "value": _json_value(v),
                    "text": value_text(s, v), "unit": s.unit, "default": s.default_text,
                    "source": settings.sources[s.name], "meaning": s.meaning})
    return out


def summary(settings: Settings) -> str:
    """One line: which settings the environment and the config file set (``kws doctor``)."""
    env = [s.env for s in SETTINGS if settings.sources[s.name].startswith("environment ")]
    keys = [str(s.key) for s in SETTINGS if settings.sources[s.name].startswith("config file ")]
    parts = []
    if env:
        parts.append(f"from the environment {', '.join(env)}")
    if keys:
        parts.append(f"from {settings.config_file}: {', '.join(keys)}")
    parts.append("the rest default" if parts else "all default")
    return f"settings: {'; '.join(parts)} (kws config lists them)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table() -> str:
    """The declarations as a Markdown table (setting, environment variable, config key,
    default, unit, meaning), ending in a newline."""
    lines = ["| setting | environment | config key | default | unit | meaning |",
             "|---|---|---|---|---|---|"]
    for s in SETTINGS:
        key = f"`{s.key}`" if s.key else "(environment only)"
        lines.append(f"| `{s.name}` | `{s.env}` | {key} | {_cell(s.default_text)} | {_cell(s.unit)} | "
                     f"{_cell(s.meaning)} |")
    return "\n".join(lines) + "\n"
