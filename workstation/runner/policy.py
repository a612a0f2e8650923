"""Whether task code runs sandboxed: the reviewer's choice, never the queue's.

The mode is ``"bwrap"`` (the default: :mod:`workstation.runner.bwrap`) or ``"none"``
(task code runs as the reviewer, unconfined). In order, the first that says:

1. the ``--no-sandbox`` flag of ``kws check`` (passed as ``flag``);
2. the environment variable ``KWS_SANDBOX`` (``bwrap`` or ``none``);
3. ``sandbox = "bwrap" | "none"`` in the user config file ``config.toml`` in
   ``$KWS_CONFIG_DIR`` or ``platformdirs.user_config_dir("kws")`` (``~/.config/kws``).

A queue's ``queue.toml`` cannot turn the sandbox off: the queue is what the sandbox
protects the reviewer from.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import msgspec
import platformdirs

from workstation.schema.problem import Problem
from workstation.schema.structs import convert
from workstation.schema.toml import read_toml

Mode = Literal["bwrap", "none"]
MODES = ("bwrap", "none")


class UserConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``config.toml``: ``sandbox`` is ``"bwrap"`` (default) or ``"none"``."""

    sandbox: Mode = "bwrap"


def config_dir() -> Path:
    """Per-user config folder: ``$KWS_CONFIG_DIR`` or ``platformdirs.user_config_dir("kws")``."""
    env = os.environ.get("KWS_CONFIG_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("kws"))


def config_file() -> Path:
    """The user config file (it may not exist)."""
    return config_dir() / "config.toml"


def load_user_config(path: Path | None = None) -> UserConfig:
    """The user config (defaults when the file does not exist).

    Raises:
        Problem: the file is not valid TOML or a key has a wrong value (named).
    """
    p = path or config_file()
    if not p.is_file():
        return UserConfig()
    data = read_toml(p)
    return convert(data, UserConfig, file=p)


def sandbox_mode(flag: str | None = None) -> str:
    """The sandbox mode (module doc): ``"bwrap"`` or ``"none"``.

    Raises:
        Problem: ``KWS_SANDBOX`` or the config file holds another value.
    """
    if flag:
        return flag
    env = os.environ.get("KWS_SANDBOX", "").strip()
    if env:
        if env not in MODES:
            raise Problem("KWS_SANDBOX", "", f"expected one of {', '.join(MODES)}, got {env!r}")
        return env
    return load_user_config().sandbox
