"""Install the ``realkernels`` extra of pyproject.toml with ``pip install --no-deps``.

The real-kernel sample queue (``sample_queue_real/``) imports Liger-Kernel and FlagGems as
installed packages. Their declared dependencies would replace the pinned torch (FlagGems
pins ``torch==2.9.0+...`` per vendor, numpy 1.26.4), so each is installed without
dependencies; the packages they import at run time that the project does not already have
are listed in the extra itself (sqlalchemy). Run as ``.venv/bin/python
scripts/install_realkernels.py``; a non-zero exit is pip's.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["realkernels"]
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", *extra]
    print("kws realkernels:", " ".join(extra), flush=True)
    return subprocess.call(cmd)


if __name__ == "__main__":
    raise SystemExit(main())
