"""Whether task code runs sandboxed: the reviewer's choice, never the queue's.

The mode is ``"bwrap"`` (the default: :mod:`workstation.runner.bwrap`) or ``"none"``
(task code runs as the reviewer, unconfined). In order, the first that says:

1. the ``--no-sandbox`` flag of ``kws check`` (passed as ``flag``);
2. the environment variable ``KWS_SANDBOX`` (``bwrap`` or ``none``);
3. ``sandbox = "bwrap" | "none"`` in the user config file ``config.toml`` in
   ``$KWS_CONFIG_DIR`` or ``platformdirs.user_config_dir("kws")`` (``~/.config/kws``).

2 and 3 are the ``sandbox`` setting (:mod:`workstation.settings`, docs/settings.md).
A queue's ``queue.toml`` cannot turn the sandbox off: the queue is what the sandbox
protects the reviewer from.
"""

from __future__ import annotations

from typing import Literal

from workstation import settings

Mode = Literal["bwrap", "none"]
MODES = ("bwrap", "none")


def sandbox_mode(flag: str | None = None) -> str:
    """The sandbox mode (module doc): ``"bwrap"`` or ``"none"``.

    Raises:
        Problem: ``KWS_SANDBOX`` or the config file holds another value (or another
            setting is malformed: the settings load as one).
    """
    if flag:
        return flag
    return settings.current().sandbox
