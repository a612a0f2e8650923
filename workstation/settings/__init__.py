"""kws's settings: every value a reviewer can set, declared once, with one typed object
holding the effective values.

- :mod:`~workstation.settings.declared`: :data:`SETTINGS`, one
  :class:`~workstation.settings.declared.Setting` each (name, environment variable,
  config-file key, default, unit, meaning, parser);
- :mod:`~workstation.settings.load`: :class:`Settings` (the effective values, each with its
  source), :func:`current` (environment over the user config file over the default,
  re-read when either changed), :func:`reload`, :func:`load`;
- :mod:`~workstation.settings.show`: the rows ``kws config`` prints and the Markdown table
  docs/settings.md carries.

Every parent-side read of a ``KWS_*`` variable goes through here (tests/test_settings.py
scans the package for others). The child side (``workstation.harness``) never imports this
package: what a job child needs is resolved here and passed by the runner through the
variables named in :mod:`workstation.protocol.childenv`.

Imports the schema layer (``Problem``, the guarded TOML read), msgspec and platformdirs;
below ``repo``, above ``protocol`` and ``schema``.
"""

from workstation.settings.declared import BY_KEY, BY_NAME, SETTINGS, Invalid, Setting
from workstation.settings.load import Settings, current, load, reload

__all__ = ["BY_KEY", "BY_NAME", "SETTINGS", "Invalid", "Setting", "Settings", "current", "load", "reload"]
