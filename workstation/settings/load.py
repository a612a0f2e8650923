"""The effective settings: environment over user config file over default, loaded once and
re-read when the environment or the config file changes.

:func:`current` is what kws calls: it keeps the last :class:`Settings` and loads again only
when one of the settings' environment variables (or a variable the default folders depend
on: ``HOME``, ``XDG_*``) or the config file (its path, size, times, inode) changed, so a
test's ``monkeypatch.setenv("KWS_STEP_TIMEOUT", "3")`` is seen by the next call;
:func:`reload` forgets the kept value. :func:`load` loads from an explicit environment
mapping (no caching).

The user config file is ``config.toml`` in the config folder (``KWS_CONFIG_DIR``, else
``platformdirs.user_config_dir("kws")``), read through
:func:`workstation.schema.toml.read_toml`; its keys are the settings' ``key``; an unknown
key is a warning (:attr:`Settings.warnings`), a bad value a
:class:`~workstation.schema.problem.Problem` naming the file and the key, as a bad
environment value is one naming the variable (``Problem("KWS_STEP_TIMEOUT", "",
"expected seconds, a number > 0, got 'abc'")``).
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from workstation.schema.problem import Problem
from workstation.schema.toml import read_toml
from workstation.settings.declared import BY_KEY, BY_NAME, SETTINGS, Invalid, Setting

CONFIG_FILE_NAME = "config.toml"
#: variables the computed default folders depend on (platformdirs reads them).
DEFAULT_DIR_VARS = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
DEFAULT = "default"


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The effective value of every setting (:data:`~workstation.settings.declared.SETTINGS`
    says each one's variable, key, unit and meaning; a ``None`` value means kws decides at
    the point of use, as the setting's ``default_text`` says).

    ``config_file``: the user config file looked at (it may not exist); ``sources``: per
    setting name, ``"default"``, ``"config file <path>"`` or ``"environment KWS_X"``;
    ``warnings``: unknown keys of the config file, as problems.
    """

    sandbox: str
    bwrap: str | None
    device: str | None
    step_timeout: float
    import_budget: float
    aot_budget: float
    hang_limit: int
    test_stretch: float
    compile_timeout: float
    torch_compile: bool
    cuda_emulation: bool
    llc_bytes: int | None
    input_budget: int | None
    result_bytes: int
    job_disk_bytes: int
    job_tmp_bytes: int
    job_shm_bytes: int
    task_max_bytes: int
    memory_limit: int | None
    pids_limit: int
    child_threads: int
    checkserver_nice: int
    rubric_path: tuple[Path, ...]
    queue: Path | None
    config_dir: Path
    cache_dir: Path
    cache_bytes: int
    data_dir: Path
    state_dir: Path
    config_file: Path
    sources: dict[str, str]
    warnings: tuple[Problem, ...] = ()


_META_FIELDS = {"config_file", "sources", "warnings"}
if set(Settings.__struct_fields__) - _META_FIELDS != set(BY_NAME):  # pragma: no cover  (a declaration drifted)
    raise RuntimeError("workstation.settings: Settings' fields and the declared SETTINGS differ: "
                       f"{sorted(set(Settings.__struct_fields__) ^ set(BY_NAME) - _META_FIELDS)}")

_UNSET = object()


def _from_env(s: Setting, env: Mapping[str, str]) -> Any:
    raw = env.get(s.env)
    if raw is None or (s.empty_unset and not raw.strip()):
        return _UNSET
    try:
        return s.parse(raw)
    except Invalid as e:
        raise Problem(s.env, "", str(e)) from None


def config_file_in(env: Mapping[str, str]) -> Path:
    """The user config file's path under the environment ``env`` (it may not exist).

    Raises:
        Problem: ``KWS_CONFIG_DIR`` is not a folder path.
    """
    s = BY_NAME["config_dir"]
    d = _from_env(s, env)
    if d is _UNSET:
        assert s.compute is not None
        d = s.compute()
    return Path(d) / CONFIG_FILE_NAME


def _read_config(path: Path) -> tuple[dict[str, Any], list[Problem]]:
    """Parsed values by setting name from the config file at ``path`` (none when it does
    not exist), and its unknown keys as warnings."""
    if not path.is_file():
        return {}, []
    data = read_toml(path)
    values: dict[str, Any] = {}
    warnings: list[Problem] = []
    for key, raw in data.items():
        s = BY_KEY.get(key)
        if s is None:
            near = difflib.get_close_matches(key, BY_KEY, n=1)
            hint = f"did you mean {near[0]}?" if near else f"the keys are {', '.join(sorted(BY_KEY))}"
            warnings.append(Problem(path, key, f"unknown key, ignored; {hint}"))
            continue
        try:
            values[s.name] = s.parse(raw)
        except Invalid as e:
            raise Problem(path, key, str(e)) from None
    return values, warnings


def load(env: Mapping[str, str] | None = None) -> Settings:
    """The settings under the environment ``env`` (default: ``os.environ``) and the user
    config file it points to: for each setting, the environment variable when set (non-empty,
    except ``KWS_BWRAP``), else the config file's key, else the default.

    Raises:
        Problem: an environment variable (named as the file, key ``""``) or a config-file
            key holds a value its setting refuses, or the config file cannot be read or
            parsed.
    """
    env = os.environ if env is None else env
    path = config_file_in(env)
    from_file, warnings = _read_config(path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        v = _from_env(s, env)
        if v is not _UNSET:
            values[s.name], sources[s.name] = v, f"environment {s.env}"
        elif s.name in from_file:
            values[s.name], sources[s.name] = from_file[s.name], f"config file {path}"
        else:
            values[s.name] = s.compute() if s.compute is not None else s.default
            sources[s.name] = DEFAULT
    return Settings(**values, config_file=path, sources=sources, warnings=tuple(warnings))


def _fingerprint() -> tuple[Any, ...]:
    env = os.environ
    try:
        path = config_file_in(env)
        st = path.stat()
        stamp: Any = (str(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    except OSError:
        stamp = (str(path), None)
    except Problem:
        stamp = None
    return (*(env.get(s.env) for s in SETTINGS), *(env.get(v) for v in DEFAULT_DIR_VARS), stamp)


_lock = threading.Lock()
_kept: tuple[tuple[Any, ...], Settings | Problem] | None = None


def current() -> Settings:
    """The effective settings (module doc: loaded again when the environment or the config
    file changed since the last call).

    Raises:
        Problem: as :func:`load` (the same problem again on each call until it is fixed).
    """
    global _kept
    fp = _fingerprint()
    with _lock:
        kept = _kept
        if kept is None or kept[0] != fp:
            try:
                got: Settings | Problem = load()
            except Problem as e:
                got = e
            _kept = kept = (fp, got)
    got = kept[1]
    if isinstance(got, Problem):
        raise Problem(got.file, got.key, got.problem)  # a fresh one: no traceback piling up
    return got


def reload() -> Settings:
    """Forget the kept settings and load them again (raises as :func:`load`)."""
    global _kept
    with _lock:
        _kept = None
    return current()
