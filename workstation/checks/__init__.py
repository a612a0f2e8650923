"""The check battery: one module per contract check id.

:func:`load_battery` imports every module of :data:`MODULES`, registering its check in
:data:`workstation.checks.base.REGISTRY` in that order (the order reports list them).
Importing this package alone loads nothing (check modules import the engine).
"""

from __future__ import annotations

import importlib

#: check modules, in report order. A module missing here is not part of the battery.
MODULES = [
    "correctness",
    "failure_mismatch",
]


def load_battery() -> None:
    """Import every check module (idempotent)."""
    for m in MODULES:
        importlib.import_module(f"workstation.checks.{m}")
