"""Shared parent-side helpers of the memory checks (``unwritten-output``,
``out-of-bounds``, ``input-mutation``, ``stale-output``, ``nondeterminism``).

The guarded run (:func:`guarded_steps`, scenario ``A``: the candidate's calls in a fresh
child, before any reference ran there) is one memoised job shared by ``unwritten-output``
and ``out-of-bounds``: its poisoned outputs serve the first, its guard bands the second.
Private to the battery (``load_battery`` skips modules starting with ``_``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from workstation.analysis.compare import region_text
from workstation.protocol.extras.guards import GuardedBuffer
from workstation.protocol.extras.monitors import Site
from workstation.protocol.steps import GuardedCallStep, Role

Scenario = Literal["A", "B"]


def guarded_step(case: dict[str, Any], seed: int, scenario: Scenario, role: Role = "candidate") -> GuardedCallStep:
    """A ``guarded_call`` step (see :mod:`workstation.harness.guards`)."""
    return GuardedCallStep(role=role, case=dict(case), seed=int(seed), scenario=scenario, guard=True)


def guarded_steps(cases: list[dict[str, Any]], seed: int, scenario: Scenario = "A") -> list[GuardedCallStep]:
    return [guarded_step(c, seed, scenario) for c in cases]


def seed_pair(seeds: tuple[int, ...]) -> tuple[int, int]:
    """Two different seeds: the first two given, or the first and the next integer."""
    a = seeds[0]
    b = seeds[1] if len(seeds) > 1 else a + 1
    return a, b


def indices(mask: np.ndarray, k: int = 16) -> list[list[int]]:
    """Up to ``k`` indices (row-major order) where ``mask`` is true, as lists."""
    flat = np.flatnonzero(mask.ravel())[:k]
    if mask.ndim == 0:
        return [[] for _ in flat]
    return [[int(i) for i in np.unravel_index(f, mask.shape)] for f in flat]


def region(mask: np.ndarray) -> dict[str, list[int]] | None:
    """Per-dimension [min, max] of the true elements of ``mask`` (None when none)."""
    if mask.ndim == 0 or not mask.any():
        return None
    coords = np.nonzero(mask)
    return {f"dim{d}": [int(c.min()), int(c.max())] for d, c in enumerate(coords)}


def where_text(mask: np.ndarray) -> str:
    """``"rows 0..63, cols 0..1023"`` for the true elements of ``mask``."""
    return region_text(region(mask))


def source(site: Site | None) -> dict[str, Any] | None:
    """A finding's ``evidence["source"]`` (``file``, ``line``) from a harness site record."""
    if site is None:
        return None
    return {"file": site.file, "line": site.line}


def buffer_text(buf: GuardedBuffer, output: int | None = None) -> str:
    """``"output 0 (float16 [4093], torch.empty at candidate.py:28)"`` and the like."""
    shape = "x".join(str(s) for s in buf.shape) or "scalar"
    what = f"{buf.dtype} [{shape}]"
    kind = buf.kind
    if kind == "allocation":
        op = buf.op or "empty"
        site = buf.site
        at = f" at {site.file}:{site.line}" if site else " (outside the task's code)"
        alloc = f"torch.{op}{at}"
        name = f"output {output}" if output is not None else "scratch buffer"
        return f"{name} ({what}, {alloc})"
    label = {"input": "input", "out_arg": "out_args input", "inout_arg": "inout_args input"}.get(kind, kind)
    return f"{label} {buf.index} ({what})"


def fmt_values(vals: np.ndarray, k: int = 6) -> str:
    """A short list of values: ``0, 0, 0`` / ``1.5, nan, ...``."""
    shown = [f"{v:.6g}" if isinstance(v, float | np.floating) else str(v) for v in vals[:k].tolist()]
    return ", ".join(shown) + (", ..." if len(vals) > k else "")
