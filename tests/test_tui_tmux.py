"""The real ``kws`` in a real terminal (tmux), with the real engine: a full review by
keyboard at 160x48, the narrow layout at 80x24, NO_COLOR and a 256-colour TERM.
Skipped where tmux is not installed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from tests.tuikit import tui_env
from workstation.rubric.model import find_rubric

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

KWS = Path(sys.executable).parent / "kws"


class Tmux:
    """One tmux server on a private socket, one session running a command."""

    def __init__(self, tmp: Path, command: str, env: dict[str, str], size: tuple[int, int]) -> None:
        self.sock = f"kws-test-{os.getpid()}-{time.monotonic_ns()}"
        script = tmp / "run.sh"
        # env -i: only ``env`` (the tmux server passes on the test process's environment,
        # COLUMNS/LINES included, which would override the pane's real size)
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        script.write_text(f"#!/bin/sh\nexec env -i {assigns} {command}\n")
        script.chmod(0o755)
        self.tmux("new-session", "-d", "-s", "kws", "-x", str(size[0]), "-y", str(size[1]), str(script))

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], check=True, capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "kws", *keys)
        if keys and keys[-1] == "Escape":
            time.sleep(0.3)  # a lone ESC is told from an escape sequence by the pause after it

    def text(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "kws", "-l", "".join(keys))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "kws")

    def wait(self, needle: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if needle in s:
                return s
            time.sleep(0.2)
        size = self.tmux("display", "-p", "-t", "kws", "#{window_width}x#{window_height}").strip()
        raise AssertionError(f"{needle!r} did not appear; the screen ({size}):\n{self.screen()}")

    def wait_re(self, pattern: str, timeout: float = 60.0) -> str:
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if rx.search(s):
                return s
            time.sleep(0.2)
        raise AssertionError(f"/{pattern}/ did not appear; the screen:\n{self.screen()}")

    def resize(self, w: int, h: int) -> None:
        self.tmux("resize-window", "-t", "kws", "-x", str(w), "-y", str(h))

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.sock, "has-session", "-t", "kws"], capture_output=True).returncode == 0

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def env(tmp_path, monkeypatch):
    root = tui_env(monkeypatch, tmp_path)
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
            "KWS_DATA_DIR", "KWS_STATE_DIR", "KWS_CONFIG_DIR", "KWS_CACHE_DIR", "XDG_CONFIG_HOME",
            "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")
    e = {k: os.environ[k] for k in keep if k in os.environ}
    e["TERM"] = "xterm-256color"
    e.setdefault("LANG", "C.UTF-8")
    return root, e


def test_real_kws_full_review_in_tmux(tmp_path, env):
    """A full review with the real engine: a commit while the battery still runs asks for
    confirmation (Esc cancels); once it is done the suggestions are taken again, the
    verdict commits, and ``kws recheck`` of it says identical (same derived cases, same
    findings)."""
    root, e = env
    t = Tmux(tmp_path, f"{KWS} --queue {shlex.quote(str(root))}", e, (160, 48))
    rubric = find_rubric("kernel-review")
    try:
        t.wait("relu-unwritten", 20)
        t.wait("5 to review", 20)
        t.keys("/")
        t.text("relu")  # sent at once, as a burst over SSH would arrive
        t.keys("Enter")
        time.sleep(0.3)
        t.keys("Enter")
        s = t.wait("unwritten-output", 30)
        assert "Source: candidate vs baseline" in s
        # while the battery runs: a complete rubric (each field's 1st value), a rationale, ctrl+s
        t.keys("M-5")
        time.sleep(0.3)
        t.keys(*["1"] * len(rubric.choice_fields))
        t.keys("e")
        t.text("Half of each output row is never written; see unwritten-output.")
        t.keys("Escape")
        t.wait("Half of each output row is never written", 10)
        t.keys("C-s")
        s = t.wait("Enter: yes", 20)  # the dialog (the rubric panel says "not final" by itself)
        assert "not finished" in s and "Enter: yes" in s
        t.keys("Escape")
        t.wait("not committed (cancelled)", 10)
        s = t.wait_re(r"(\d+)/\1 done · 2 fail", 240)  # the whole battery: unwritten-output and bounds-proof
        assert re.search(r"✘ FAIL\s+unwritten-output", s) and re.search(r"✘ FAIL\s+bounds-proof", s), s  # fails listed first
        # now take kws's suggestions: clear every field, accept all (A), then give the fields
        # kws has no suggestion for their last value by number
        t.keys(*["Up"] * len(rubric.choice_fields))
        for _f in rubric.choice_fields:
            t.keys("BSpace", "Down")
        t.keys("A")
        time.sleep(0.5)
        rows = [ln for ln in t.screen().splitlines() if any(f.label[:20] in ln for f in rubric.choice_fields)]
        t.keys(*["Up"] * len(rubric.choice_fields))
        for f in rubric.choice_fields:
            line = next((ln for ln in rows if f.label[:20] in ln), None)
            assert line is not None, f"{f.label} is not on the screen:\n{t.screen()}"
            t.keys(str(len(f.values)) if "needed" in line else "Down")  # no suggestion: its last value
        end = time.monotonic() + 10  # the keys are sent; wait until the app has taken them all
        while "needed" in t.screen() and time.monotonic() < end:
            time.sleep(0.2)
        assert "needed" not in t.screen(), t.screen()
        t.keys("C-s")
        s = t.wait("committed verdict", 30)
        vid = re.search(r"committed verdict ([0-9a-f-]{36})", s).group(1)
        # 80x24: the panels become tabs, nothing clipped in the shown one
        t.resize(80, 24)
        s = t.wait("[5 Rubric]", 10)
        assert "Overall" in s and "Reference legitimacy" in s
        t.keys("M-3")
        s = t.wait("[3 Checks]", 10)
        assert "unwritten-output" in s
        t.keys("Escape")
        s = t.wait("my verdict", 10)
        t.keys("C-q")
        end = time.monotonic() + 40  # closing the runner waits for the fork server to exit
        while t.alive() and time.monotonic() < end:
            time.sleep(0.2)
        assert not t.alive(), "kws did not exit on ctrl+q"
    finally:
        t.kill()
    log = git.Repo(root).git.log("--format=%s")
    assert "kws verdict: reject relu-unwritten" in log
    r = subprocess.run([str(KWS), "recheck", vid, "--queue", str(root)], env=e, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    # the verdict-relevant results must match; info findings may differ (timings, solver
    # figures), and the app's checks_complete counts only applicable checks (recheck's does not yet)
    assert "identical: every check status and all" in r.stdout or \
        "same verdict-relevant results: every check status and every fail/warn finding as recorded" in r.stdout, r.stdout


def test_real_kws_no_color_narrow_terminal(tmp_path, env):
    root, e = env
    e = {**e, "NO_COLOR": "1", "TERM": "xterm-256color"}
    t = Tmux(tmp_path, f"{KWS} --queue {shlex.quote(str(root))} --keymap vim", e, (80, 24))
    try:
        s = t.wait("keys: vim", 20)
        assert "▶" in s  # the cursor row is marked without colour
        t.keys("j", "j", "Enter")
        s = t.wait("[3 Checks]", 20)
        assert "1 Spec" in s and "5 Rubric" in s
        t.keys("F1")
        s = t.wait("Keys (Esc closes)", 10)
        t.keys("Escape")
        t.keys("Escape")
        t.keys("q")
        end = time.monotonic() + 40  # closing the runner waits for the fork server to exit
        while t.alive() and time.monotonic() < end:
            time.sleep(0.2)
        assert not t.alive()
    finally:
        t.kill()
