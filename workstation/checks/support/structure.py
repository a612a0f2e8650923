"""The structure the task's own inputs always show, kept by every check that transforms values
(issue 39: a bucketize kernel failed by input-distributions because its sorted boundary vector
was replaced by unsorted random values, where the spec says "sorted ascending" and
``make_inputs`` always sorts).

:func:`input_structure` reads the inputs ``make_inputs`` returns for a case on every seed of
the run (the reference's calls with their inputs sent back, memoised) and keeps, per floating
tensor input, the structures it shows on *every* seed: ``sorted`` / ``sorted_desc`` along the
last dimension, ``nonnegative``, ``symmetric`` in the last two dimensions, ``stochastic``
(non-negative rows that sum to one), ``integer`` (integer values). Each needs enough
elements that chance does not show it (:data:`MIN_ELEMENTS`). With ``[inputs]
keep_structure`` (declared: never transformed) the result says how to vary inputs without
leaving the domain the spec and ``make_inputs`` draw from:

- :attr:`Structure.frozen`: inputs no value transform may touch: the declared ones and the
  integer-valued ones (indices, counts, labels held in a float tensor: a new value would
  change what they mean);
- :attr:`Structure.keep`: the ``keep`` field of a value transform (``{"<index>":
  [structures]}``): the harness puts the transformed values back into those structures
  (:func:`workstation.harness.values.keep_structure`).

Same imports as the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workstation.checks.support.keep import kept_inputs
from workstation.engine.context import CheckContext
from workstation.protocol.extras.calls import CallExtra

#: structures a value transform can restore (the harness's ``keep``), in the order they are tried.
RESTORABLE = ("sorted", "sorted_desc", "nonnegative", "symmetric", "stochastic")
#: the fewest elements (per row for the row-wise ones) an input needs for a structure to count:
#: a random draw of that size shows it on three seeds with a probability under 1e-3.
MIN_ELEMENTS = {"sorted": 4, "sorted_desc": 4, "nonnegative": 4, "symmetric": 2, "stochastic": 2, "integer": 4}
#: how far a row's sum may be from one, per dtype (its rounding over a few hundred terms).
STOCHASTIC_TOL = {"float16": 2e-2, "bfloat16": 5e-2}
STOCHASTIC_TOL_DEFAULT = 1e-3


def shown(a: np.ndarray, dtype: str = "") -> set[str]:
    """The structures one floating input array ``a`` shows (module doc)."""
    out: set[str] = set()
    if a.size == 0 or a.dtype.kind not in "fc" or not np.all(np.isfinite(a)):
        return out
    v = a.astype(np.float64, copy=False)
    if v.ndim == 0 or np.all(v == v.flat[0]):
        return out  # constant: degenerate-inputs' business, not a structure
    n = v.shape[-1]
    if v.size >= MIN_ELEMENTS["integer"] and np.all(v == np.round(v)):
        out.add("integer")
    if v.size >= MIN_ELEMENTS["nonnegative"] and np.all(v >= 0):
        out.add("nonnegative")
    if n >= MIN_ELEMENTS["sorted"]:
        d = np.diff(v, axis=-1)
        if np.all(d >= 0) and np.any(d > 0):
            out.add("sorted")
        elif np.all(d <= 0) and np.any(d < 0):
            out.add("sorted_desc")
    if v.ndim >= 2 and n == v.shape[-2] and n >= MIN_ELEMENTS["symmetric"] and np.array_equal(v, np.swapaxes(v, -1, -2)):
        out.add("symmetric")
    if n >= MIN_ELEMENTS["stochastic"] and np.all(v >= 0):
        tol = STOCHASTIC_TOL.get(dtype, STOCHASTIC_TOL_DEFAULT)
        if np.all(np.abs(v.sum(axis=-1) - 1.0) <= tol):
            out.add("stochastic")
    return out


@dataclass(frozen=True)
class Structure:
    """What the inputs of one case always show (module doc).

    Attributes:
        shows: input index -> the structures it showed on every seed read.
        frozen: inputs no value transform may touch (declared ``keep_structure``, integer-valued).
        keep: the value transforms' ``keep`` field (input index as text -> restorable structures).
        seeds: the seeds whose inputs were read.
        floats: every floating tensor input (index), in order.
    """

    shows: dict[int, tuple[str, ...]] = field(default_factory=dict)
    frozen: frozenset[int] = frozenset()
    keep: dict[str, list[Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()
    floats: tuple[int, ...] = ()

    def args(self, candidates: list[int]) -> list[int]:
        """``candidates`` (input indices a check would vary) less the frozen ones."""
        return [i for i in candidates if i not in self.frozen]

    def keep_for(self, args: list[int] | None) -> dict[str, list[Any]]:
        """:attr:`keep` restricted to ``args`` (all of it for ``None``: every input)."""
        if args is None:
            return dict(self.keep)
        wanted = {str(i) for i in args}
        return {k: v for k, v in self.keep.items() if k in wanted}

    def evidence(self) -> dict[str, Any]:
        """The structures as a finding's evidence shows them."""
        return {"inputs_keep": {str(i): list(s) for i, s in sorted(self.shows.items()) if s},
                "frozen": sorted(self.frozen), "seeds": list(self.seeds)}


def input_structure(ctx: CheckContext, case: dict[str, Any]) -> Structure:
    """The structure of ``case``'s inputs over the run's seeds (module doc), memoised per
    run. Seeds whose reference call failed are left out; an input no seed described shows
    nothing.

    Raises:
        TaskProblem: (``task.toml``) a ``keep_structure`` index beyond the inputs.
    """
    key = ("input_structure", tuple(sorted((k, str(v)) for k, v in case.items())))
    return ctx.stash.once(key, lambda: _read(ctx, dict(case)))


def _read(ctx: CheckContext, case: dict[str, Any]) -> Structure:
    seeds = tuple(ctx.seeds)
    refs = ctx.reference([(case, s) for s in seeds], send_inputs=True)
    declared = kept_inputs(ctx, [(case, r) for r in refs])
    per: dict[int, set[str]] = {}
    read: list[int] = []
    for seed, r in zip(seeds, refs, strict=True):
        if not r.ok or r.step is None:
            continue
        read.append(seed)
        seen_here: set[int] = set()
        for d in r.payload(CallExtra).inputs:
            if d.kind != "tensor" or not d.dtype.startswith(("float", "bfloat")):
                continue
            arr = r.step.arrays.get(f"in{d.index}")
            if arr is None:
                continue
            s = shown(arr, d.dtype)
            per[d.index] = s if d.index not in per else per[d.index] & s
            seen_here.add(d.index)
        for i in list(per):
            if i not in seen_here:  # an input this seed did not describe: nothing is known to hold
                per[i] = set()
    shows = {i: tuple(k for k in (*RESTORABLE, "integer") if k in s) for i, s in per.items()}
    frozen = frozenset(set(declared) | {i for i, s in shows.items() if "integer" in s})
    keep: dict[str, list[Any]] = {}
    for i, sh in shows.items():
        kinds = [k for k in RESTORABLE if k in sh]
        if "stochastic" in kinds:
            kinds = [k for k in kinds if k != "nonnegative"]
        if kinds and i not in frozen:
            keep[str(i)] = kinds
    return Structure(shows=shows, frozen=frozen, keep=keep, seeds=tuple(read), floats=tuple(sorted(per)))
