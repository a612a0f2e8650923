#!/usr/bin/env bash
# Set up kws in ./.venv: reuse the machine's torch when one is importable (a GPU box's CUDA
# build), else install the pinned CPU-capable torch==2.13.0 (on a machine of this project's
# kind it comes from a local file; never an unpinned torch, which pulls a multi-GB CUDA build).
# It also installs bubblewrap (the sandbox of task code) where it can, and says what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-bubblewrap.sh
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  # --system-site-packages: a torch already installed for this Python stays visible.
  "$PY" -m venv --system-site-packages .venv
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "kws setup: no importable torch; installing torch==2.13.0"
  .venv/bin/pip install --quiet "torch==2.13.0"
fi
# KWS_EXTRAS: the optional extras to install (CI: test,ray,pallas,cuda-read,prove; see pyproject.toml).
.venv/bin/pip install --quiet --disable-pip-version-check -e ".[${KWS_EXTRAS:-test}]"
.venv/bin/python -c "import torch, textual; print('kws setup: torch', torch.__version__, '| textual', textual.__version__)"
