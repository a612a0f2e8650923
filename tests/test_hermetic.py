"""The suite's hermetic environment (tests/conftest.py): a developer's ``KWS_*`` variables and
``~/.config/kws/config.toml`` never reach a test or a test's child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import conftest
from workstation import settings
from workstation.settings.declared import SETTINGS

#: the settings the suite sets itself (tests/conftest.py); every other one is at its default.
SUITE_SET = {"cache_dir", "cuda_emulation"}

#: a child interpreter's view: its KWS_* variables and the settings' sources and warnings.
CHILD_VIEW = ("import json, os\n"
              "from workstation import settings\n"
              "s = settings.load()\n"
              "print(json.dumps({'kws': sorted(k for k in os.environ if k.startswith('KWS_')),\n"
              "                  'sources': s.sources, 'warnings': len(s.warnings),\n"
              "                  'config_file': str(s.config_file)}))\n")


def _expect_suite_view(kws_vars: set[str], sources: dict[str, str], warnings: int, config_file: Path) -> None:
    assert kws_vars - set(conftest.SUITE_CHANNELS) == {"KWS_CACHE_DIR", "KWS_CUDA_EMULATION"}
    assert config_file == Path(os.environ["XDG_CONFIG_HOME"]) / "kws" / "config.toml"
    assert not config_file.exists() and warnings == 0
    for d in SETTINGS:
        want = f"environment {d.env}" if d.name in SUITE_SET else "default"
        assert sources[d.name] == want, d.name


def test_tests_and_their_children_see_only_the_suites_settings():
    """In this process and in a child interpreter: no KWS_* variable but the suite's, an
    empty per-user config folder, every other setting at its default."""
    s = settings.load()
    _expect_suite_view({k for k in os.environ if k.startswith("KWS_")}, dict(s.sources), len(s.warnings),
                       s.config_file)
    assert s.step_timeout == 30.0 and s.cuda_emulation is False
    p = subprocess.run([sys.executable, "-c", CHILD_VIEW], capture_output=True, text=True, timeout=120,
                       cwd=conftest.REPO)
    assert p.returncode == 0, p.stderr
    child = json.loads(p.stdout)
    _expect_suite_view(set(child["kws"]), child["sources"], child["warnings"], Path(child["config_file"]))


def test_a_polluted_environment_and_home_do_not_reach_the_tests(tmp_path):
    """A developer's shell with a bogus ``KWS_STEP_TIMEOUT`` and a home whose
    ``~/.config/kws/config.toml`` has a bad value and an unknown key: kws refuses to load
    its settings there, yet a pytest run of the suite started there sees the scrubbed
    environment (the test above passes in it)."""
    home = tmp_path / "home"
    (home / ".config" / "kws").mkdir(parents=True)
    (home / ".config" / "kws" / "config.toml").write_text('step_timeout = "abc"\nstep_timout = 5\n')
    env = {k: v for k, v in os.environ.items() if k not in conftest.USER_DIR_VARS}
    env.update(HOME=str(home), KWS_STEP_TIMEOUT="abc", KWS_CUDA_EMULATION="1", KWS_SANDBOX="none",
               KWS_CACHE_DIR=str(tmp_path / "my-cache"))
    load = [sys.executable, "-c", "from workstation import settings; settings.load()"]

    # the pollution is real: outside the suite each part of it alone stops kws's settings
    (tmp_path / "empty-home").mkdir()
    var_only = {**env, "HOME": str(tmp_path / "empty-home")}
    bare = subprocess.run(load, env=var_only, capture_output=True, text=True, timeout=120, cwd=conftest.REPO)
    assert bare.returncode != 0 and "KWS_STEP_TIMEOUT" in bare.stderr, bare.stderr
    file_only = {k: v for k, v in env.items() if k != "KWS_STEP_TIMEOUT"}
    bare = subprocess.run(load, env=file_only, capture_output=True, text=True, timeout=120, cwd=conftest.REPO)
    assert bare.returncode != 0 and "config.toml: step_timeout" in bare.stderr, bare.stderr

    # the suite under it: the test above, in a child pytest, sees only the suite's settings
    probe = f"{Path(__file__).relative_to(conftest.REPO)}::test_tests_and_their_children_see_only_the_suites_settings"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", probe], env=env,
                         capture_output=True, text=True, timeout=600, cwd=conftest.REPO)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
