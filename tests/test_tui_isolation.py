"""The review app's own process never imports torch or triton, also while the real
engine runs checks (task code runs in the runner's child processes only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tuikit import tui_env

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path.insert(0, {repo!r})
    from workstation.tui.app import KwsApp

    async def main():
        app = KwsApp({queue!r})  # the real check source: engine + isolated runner
        async with app.run_test(size=(160, 48)) as pilot:
            end = time.monotonic() + 240
            while not app.queue.loaded:
                await pilot.pause(0.1)
            app.screen.open_task("relu-unwritten")
            while time.monotonic() < end:
                await pilot.pause(0.2)
                s = app.sessions.get("relu-unwritten")
                if s is not None and (s.final_report is not None or s.error):
                    break
            s = app.sessions["relu-unwritten"]
            print(json.dumps({{
                "torch": "torch" in sys.modules, "triton": "triton" in sys.modules,
                "error": s.error, "checks": {{c: r.status for c, r in s.rows.items()}},
                "device": s.device,
            }}))

    asyncio.run(main())
""")


@pytest.mark.slow
def test_app_process_never_imports_torch_or_triton(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    script = tmp_path / "run_app.py"
    script.write_text(SCRIPT.format(repo=str(REPO), queue=str(root)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] == ""
    assert out["checks"]["unwritten-output"] == "fail"  # the real battery ran on real task code
    assert out["device"].startswith(("cpu", "cuda"))
    assert out["torch"] is False and out["triton"] is False
