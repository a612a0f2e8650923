"""The last ``kws selfcheck`` figure, kept for the help screen.

``kws selfcheck`` stores its summary ("battery catches N/M, clean twins quiet K/M") in
``<cache dir>/selfcheck/<kws version>.json`` (cache dir: ``$KWS_CACHE_DIR`` or
``platformdirs.user_cache_dir("kws")``); the app's help screen shows the one stored for the
installed version, or says that none was measured. Keyed by version, so an upgrade never
shows an older battery's figure. A cache only: deleting it loses nothing but the display.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from workstation import __version__, settings

__all__ = ["figure_file", "load_figure", "store_figure", "figure_text"]


def figure_file(version: str = __version__) -> Path:
    """The figure's file for kws ``version``."""
    safe = re.sub(r"[^A-Za-z0-9._+-]+", "-", version)
    return Path(settings.current().cache_dir) / "selfcheck" / f"{safe}.json"


def store_figure(figure: dict[str, Any], version: str = __version__) -> Path:
    """Write ``figure`` (the summary fields of a selfcheck result, plus ``when`` and
    ``queue``) atomically for ``version``; returns the file. OSError propagates."""
    path = figure_file(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({**figure, "version": version}, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def load_figure(version: str = __version__) -> dict[str, Any] | None:
    """The stored figure of ``version``, or None when none was stored or it is unreadable."""
    try:
        data = json.loads(figure_file(version).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == version else None


def figure_text(version: str = __version__) -> str:
    """One line for the help screen: the stored figure of ``version`` with when and how it
    was measured, or how to measure it."""
    fig = load_figure(version)
    if fig is None:
        return f"kws {version}: no selfcheck measured yet (run `kws selfcheck`)"
    scope = "full battery" if fig.get("full") else "expected checks"
    subset = f", subset {fig['subset']}" if fig.get("subset") else ""
    return (f"kws {version}: {fig.get('summary', '?')} (published-hack corpus, {scope}{subset}, "
            f"{fig.get('device', '?')}, {fig.get('when', '?')})")
