"""kws's settings: one declaration each, environment over config file over default, a
Problem naming the variable or the file and key on a bad value, ``kws config``, the
documented table, and no other ``KWS_*`` read in workstation/ (an AST scan)."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from workstation import settings
from workstation.cli.main import main
from workstation.protocol import childenv
from workstation.schema.problem import Problem
from workstation.settings.declared import SETTINGS, Invalid, boolean, seconds, size
from workstation.settings.show import markdown_table, rows

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "workstation"


def _env(tmp_path: Path, **kw: str) -> dict[str, str]:
    """An environment with the config folder in ``tmp_path`` and no other KWS_ variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWS_")}
    env["KWS_CONFIG_DIR"] = str(tmp_path)
    env.update(kw)
    return env


def test_the_defaults_are_the_declared_ones(tmp_path):
    s = settings.load(_env(tmp_path))
    assert s.config_file == tmp_path / "config.toml"
    for d in SETTINGS:
        if d.name == "config_dir":
            assert s.config_dir == tmp_path and s.sources["config_dir"] == "environment KWS_CONFIG_DIR"
            continue
        want = d.compute() if d.compute else d.default
        assert getattr(s, d.name) == want, d.name
        assert s.sources[d.name] == "default"
    # the values kws has always used
    assert (s.step_timeout, s.hang_limit, s.compile_timeout, s.pids_limit, s.child_threads) == (30.0, 2, 90.0, 4096, 1)
    assert (s.result_bytes, s.task_max_bytes, s.checkserver_nice) == (768 << 20, 256 << 20, 10)
    assert s.sandbox == "bwrap" and s.torch_compile is True and s.device is None and s.bwrap is None
    assert s.warnings == ()


def test_environment_over_config_file_over_default(tmp_path):
    (tmp_path / "config.toml").write_text('step_timeout = 45\nhang_limit = 3\nsandbox = "none"\n'
                                          'rubric_path = ["/r1", "~/r2"]\nmemory_limit = "16G"\n')
    s = settings.load(_env(tmp_path, KWS_STEP_TIMEOUT="7.5"))
    assert s.step_timeout == 7.5 and s.sources["step_timeout"] == "environment KWS_STEP_TIMEOUT"
    assert s.hang_limit == 3 and s.sources["hang_limit"] == f"config file {tmp_path / 'config.toml'}"
    assert s.sandbox == "none" and s.memory_limit == 16 << 30
    assert s.rubric_path == (Path("/r1"), Path("~/r2").expanduser())
    assert s.compile_timeout == 90.0 and s.sources["compile_timeout"] == "default"


def test_an_empty_variable_is_unset_except_bwrap_where_it_means_none(tmp_path):
    s = settings.load(_env(tmp_path, KWS_STEP_TIMEOUT="", KWS_DEVICE=" ", KWS_BWRAP="", KWS_CACHE_DIR=""))
    assert s.step_timeout == 30.0 and s.device is None and s.sources["cache_dir"] == "default"
    assert s.bwrap == "" and s.sources["bwrap"] == "environment KWS_BWRAP"


@pytest.mark.parametrize(("var", "raw", "words"), [
    ("KWS_STEP_TIMEOUT", "abc", "expected seconds, a number > 0, got 'abc'"),
    ("KWS_STEP_TIMEOUT", "-1", "expected seconds, a number > 0"),
    ("KWS_COMPILE_TIMEOUT", "nan", "expected seconds"),
    ("KWS_HANG_LIMIT", "0", "expected a count, an integer >= 1, got '0'"),
    ("KWS_PIDS_LIMIT", "4.5", "an integer"),
    ("KWS_MEMORY_LIMIT", "16Q", "expected bytes, an integer > 0 or a size such as 16G, got '16Q'"),
    ("KWS_SANDBOX", "off", "expected one of bwrap, none, got 'off'"),
    ("KWS_DEVICE", "tpu", "expected one of cpu, cuda, auto"),
    ("KWS_TORCH_COMPILE", "maybe", "expected 1 or 0"),
    ("KWS_CHECKSERVER_NICE", "25", "from 0 to 19"),
])
def test_a_bad_environment_value_is_a_problem_naming_the_variable(tmp_path, var, raw, words):
    with pytest.raises(Problem) as e:
        settings.load(_env(tmp_path, **{var: raw}))
    assert e.value.file == Path(var) and e.value.key == ""
    assert words in e.value.problem
    assert str(e.value).startswith(f"{var}: ")


def test_a_bad_config_value_names_the_file_and_key_and_unknown_keys_warn(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("step_timout = 3\nstep_timeout = 4\n")
    s = settings.load(_env(tmp_path))
    assert s.step_timeout == 4.0
    [w] = s.warnings
    assert (w.file, w.key) == (cfg, "step_timout") and "did you mean step_timeout?" in w.problem
    cfg.write_text('torch_compile = "no way"\n')
    with pytest.raises(Problem) as e:
        settings.load(_env(tmp_path))
    assert (e.value.file, e.value.key) == (cfg, "torch_compile")
    cfg.write_text("step_timeout = [\n")
    with pytest.raises(Problem) as e:
        settings.load(_env(tmp_path))
    assert e.value.file == cfg


def test_parsers():
    assert size("16G") == 16 << 30 and size("512m") == 512 << 20 and size("1e9") == 10 ** 9 and size(4096) == 4096
    assert size(" 1.5K ") == 1536
    for bad in ("", "G", "0", "-5", True, [1], "1e400"):
        with pytest.raises(Invalid):
            size(bad)
    assert seconds("2") == 2.0 and seconds(0.5) == 0.5
    for bad in (True, "inf", "0", None):
        with pytest.raises(Invalid):
            seconds(bad)
    assert boolean("0") is False and boolean("YES") is True and boolean(False) is False
    with pytest.raises(Invalid):
        boolean(2)


def test_current_follows_the_environment_and_the_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("KWS_HANG_LIMIT", raising=False)
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "3")
    assert settings.current().step_timeout == 3.0
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "4")
    assert settings.current().step_timeout == 4.0
    first = settings.current()
    assert settings.current() is first  # kept while nothing changed
    (tmp_path / "config.toml").write_text("hang_limit = 5\n")
    assert settings.current().hang_limit == 5
    (tmp_path / "config.toml").write_text("hang_limit = 7\n")  # same size: the file's times and inode tell
    assert settings.current().hang_limit == 7
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "x")
    with pytest.raises(Problem, match="KWS_STEP_TIMEOUT"):
        settings.current()
    with pytest.raises(Problem, match="KWS_STEP_TIMEOUT"):  # again, until it is fixed
        settings.current()
    monkeypatch.delenv("KWS_STEP_TIMEOUT")
    assert settings.reload().step_timeout == 30.0


def test_the_consumers_read_the_settings(tmp_path, monkeypatch):
    from workstation.checks.support.timing import (
        cache_bytes_override,
        compile_timeout_s,
        torch_compile_enabled,
    )
    from workstation.engine.context import hang_limit, step_timeout_s
    from workstation.repo.gitqueue import data_dir, state_dir
    from workstation.rubric.model import rubric_search_path
    from workstation.runner import bwrap, cgroup, taskcopy
    from workstation.runner.policy import sandbox_mode
    from workstation.runner.sandbox import kws_cache_dir
    from workstation.tui.keymap import config_dir

    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path / "cfg"))
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text(f'llc_bytes = "4M"\nsandbox = "none"\nrubric_path = ["{tmp_path}/r"]\n')
    for var, val in {"KWS_STEP_TIMEOUT": "1.5", "KWS_HANG_LIMIT": "1", "KWS_COMPILE_TIMEOUT": "12",
                     "KWS_TORCH_COMPILE": "0", "KWS_MEMORY_LIMIT": "2G", "KWS_PIDS_LIMIT": "99",
                     "KWS_TASK_MAX_BYTES": "1M", "KWS_BWRAP": "", "KWS_CACHE_DIR": str(tmp_path / "c"),
                     "KWS_DATA_DIR": str(tmp_path / "d"), "KWS_STATE_DIR": str(tmp_path / "s")}.items():
        monkeypatch.setenv(var, val)
    assert (step_timeout_s(), hang_limit(), compile_timeout_s(), torch_compile_enabled()) == (1.5, 1, 12.0, False)
    assert cache_bytes_override() == 4 << 20 and sandbox_mode() == "none" and sandbox_mode("bwrap") == "bwrap"
    assert (cgroup.memory_limit_bytes(), cgroup.pids_limit(), taskcopy.task_max_bytes()) == (2 << 30, 99, 1 << 20)
    assert bwrap.find_bwrap() is None
    assert (kws_cache_dir(), data_dir(), state_dir(), config_dir()) == (
        tmp_path / "c", tmp_path / "d", tmp_path / "s", tmp_path / "cfg")
    assert rubric_search_path()[0] == tmp_path / "r"
    big = tmp_path / "task"
    big.mkdir()
    (big / "blob.bin").write_bytes(b"\0" * ((1 << 20) + 1))
    with pytest.raises(taskcopy.TaskFolderError, match="more than 1 MiB"):
        taskcopy.scan(big)


def test_the_child_gets_resolved_values_through_the_channel(tmp_path, monkeypatch):
    from workstation.runner.server import child_env

    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("KWS_INPUT_BUDGET", "1G")
    monkeypatch.setenv("KWS_CHILD_THREADS", "3")
    monkeypatch.setenv("KWS_STEP_TIMEOUT", "9")
    env = child_env(tmp_path / "home", "cpu")
    assert env[childenv.DEVICE] == "cpu" and env[childenv.INPUT_BUDGET] == str(1 << 30)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "3"
    assert not {k for k in env if k.startswith("KWS_")} - set(childenv.CHANNEL)  # nothing else of kws's leaks
    monkeypatch.delenv("KWS_INPUT_BUDGET")
    assert childenv.INPUT_BUDGET not in child_env(tmp_path / "home", None)


# -- `kws config` -------------------------------------------------------------------------


def test_kws_config_prints_every_setting_with_value_unit_source_and_meaning(tmp_path):
    (tmp_path / "config.toml").write_text("hang_limit = 4\nhang_limt = 1\n")
    r = CliRunner().invoke(main, ["config"], env=_env(tmp_path, KWS_STEP_TIMEOUT="12"))
    assert r.exit_code == 0, r.output
    out = r.output
    assert re.search(r"^step_timeout\s+12 CPU s\s+\(environment KWS_STEP_TIMEOUT\)$", out, re.M)
    assert re.search(rf"^hang_limit\s+4 hangs\s+\(config file {re.escape(str(tmp_path))}/config.toml\)$", out, re.M)
    assert re.search(r"^result_bytes\s+805306368 \(768 MiB\) bytes\s+\(default\)$", out, re.M)
    assert "warning: " in out and "hang_limt" in out
    for d in SETTINGS:
        assert re.search(rf"^{d.name}\s", out, re.M), d.name

    r = CliRunner().invoke(main, ["config", "--json"], env=_env(tmp_path, KWS_STEP_TIMEOUT="12"))
    doc = json.loads(r.output)
    by = {row["name"]: row for row in doc["settings"]}
    assert [row["name"] for row in doc["settings"]] == [d.name for d in SETTINGS]
    assert by["step_timeout"]["value"] == 12.0 and by["step_timeout"]["unit"] == "CPU s"
    assert by["step_timeout"]["source"] == "environment KWS_STEP_TIMEOUT"
    assert by["config_dir"]["value"] == str(tmp_path) and by["device"]["value"] is None
    assert doc["config_file_exists"] is True and doc["warnings"][0]["key"] == "hang_limt"


def test_kws_config_exits_2_naming_a_bad_value(tmp_path):
    r = CliRunner().invoke(main, ["config"], env=_env(tmp_path, KWS_STEP_TIMEOUT="abc"))
    assert r.exit_code == 2
    assert "KWS_STEP_TIMEOUT: expected seconds, a number > 0, got 'abc'" in r.output
    (tmp_path / "config.toml").write_text('memory_limit = "lots"\n')
    r = CliRunner().invoke(main, ["config", "--json"], env=_env(tmp_path))
    assert r.exit_code == 2
    assert json.loads(r.output)["error"] == {"file": str(tmp_path / "config.toml"), "key": "memory_limit",
                                             "problem": "expected bytes, an integer > 0 or a size such as 16G, "
                                                        "got 'lots'"}


def test_every_command_stops_on_a_bad_setting(tmp_path):
    r = CliRunner().invoke(main, ["queue", "--queue", str(tmp_path)], env=_env(tmp_path, KWS_HANG_LIMIT="many"))
    assert r.exit_code == 2 and "KWS_HANG_LIMIT: expected a count" in r.stderr and not r.stdout
    # kws check --json says it in the contract's error object, before any task code starts
    task = REPO / "sample_queue" / "tasks" / "bench-honest"
    r = CliRunner().invoke(main, ["check", str(task), "--json"], env=_env(tmp_path, KWS_DEVICE="tpu"))
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"] == {"file": "KWS_DEVICE", "key": "",
                                             "problem": "expected one of cpu, cuda, auto, got 'tpu'"}
    # an unknown config key is only a warning
    (tmp_path / "config.toml").write_text("colour = 1\n")
    r = CliRunner().invoke(main, ["queue", "--queue", str(tmp_path)], env=_env(tmp_path))
    assert "kws: warning: " in r.stderr and "colour: unknown key, ignored" in r.stderr


def test_the_documented_table_is_the_declarations():
    doc = (REPO / "docs" / "settings.md").read_text()
    start, end = "<!-- settings table: kws config --markdown -->\n", "<!-- end of settings table -->"
    assert start in doc and end in doc
    table = doc.split(start, 1)[1].split(end, 1)[0]
    assert table == markdown_table(), "docs/settings.md is stale: paste `kws config --markdown` between its markers"
    assert rows(settings.load({"KWS_CONFIG_DIR": "/nonexistent"}))  # the rows build from every declaration


# -- no other KWS_ reads -------------------------------------------------------------------

_ENVIRON = {"os.environ", "environ"}
_ENV_CALLS = {"os.getenv", "getenv", "os.environ.get", "environ.get", "os.environ.pop", "environ.pop",
              "os.environ.setdefault", "environ.setdefault"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def kws_env_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) of every read of a ``KWS_*`` variable from the process environment
    in ``source``: ``os.environ.get/pop/setdefault``, ``os.getenv``, ``os.environ[...]``,
    ``... in os.environ``; the name as a literal, a module constant or a
    :mod:`workstation.protocol.childenv` constant."""
    tree = ast.parse(source)
    consts = {n: v for n, v in vars(childenv).items() if isinstance(v, str) and v.startswith("KWS_")}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            consts.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})

    def name_of(key: ast.AST) -> str | None:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        if isinstance(key, ast.Name | ast.Attribute):
            return consts.get(key.id if isinstance(key, ast.Name) else key.attr)
        if isinstance(key, ast.JoinedStr) and key.values and isinstance(key.values[0], ast.Constant):
            return str(key.values[0].value)
        return None

    out = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and _dotted(node.func) in _ENV_CALLS and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and _dotted(node.value) in _ENVIRON and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif (isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn)
              and _dotted(node.comparators[0]) in _ENVIRON):
            key = node.left
        name = name_of(key) if key is not None else None
        if name and name.startswith("KWS_"):
            out.append((node.lineno, name))
    return out


def test_the_scan_sees_each_way_of_reading_a_variable():
    src = ('import os\nfrom os import environ, getenv\nfrom workstation.protocol import childenv\nV = "KWS_V"\n'
           'a = os.environ.get("KWS_A")\nb = os.getenv("KWS_B", "1")\nc = os.environ["KWS_C"]\n'
           'd = "KWS_D" in os.environ\ne = environ.get(V)\nf = getenv(childenv.DEVICE)\n'
           'g = os.environ.get(f"KWS_{x}")\nh = os.environ.get("HOME")\nos.environ["KWS_W"] = "1"\n')
    assert kws_env_reads(src) == [(5, "KWS_A"), (6, "KWS_B"), (7, "KWS_C"), (8, "KWS_D"), (9, "KWS_V"),
                                  (10, "KWS_DEVICE"), (11, "KWS_")]


def test_only_the_settings_read_kws_variables():
    """Every KWS_ variable of the parent goes through workstation.settings; the harness
    (which cannot import it) reads only the channel the runner sets
    (workstation.protocol.childenv)."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("workstation/settings/"):
            continue
        for line, name in kws_env_reads(path.read_text()):
            if rel.startswith("workstation/harness/") and name in childenv.CHANNEL:
                continue
            bad.append(f"{rel}:{line}: {name}")
    assert bad == [], "read these through workstation.settings (or the child channel):\n" + "\n".join(bad)


def test_the_channel_variables_are_the_settings_of_the_same_name():
    envs = {d.env for d in SETTINGS}
    assert set(childenv.CHANNEL) <= envs
