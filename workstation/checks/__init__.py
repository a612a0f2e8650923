"""The check battery: one module per contract check id.

:func:`load_battery` imports every module of this package (except ``base``); each module
registers its check with :func:`workstation.engine.check.register`. Reports list checks in
:data:`ORDER` (the contract's table order), then any others by id. Importing this package
alone loads nothing (check modules import the engine).
"""

from __future__ import annotations

import importlib
import pkgutil

#: report order: the contract's check-id table.
ORDER = [
    "correctness", "out-of-bounds", "edge-shapes", "noncontiguous", "special-values",
    "unwritten-output", "input-mutation", "stale-output", "nondeterminism",
    "degenerate-inputs", "tolerance-loose", "tolerance-tight", "precision-regime",
    "reference-suspect", "fallback", "tampering", "test-gap", "benchmark-bias",
    "speedup-claim", "autotune", "failure-mismatch",
]


def load_battery() -> None:
    """Import every check module of this package (idempotent)."""
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
