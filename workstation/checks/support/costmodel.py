"""The cost model of derived cases: how expensive a case is expected to be, so the
shape-varying checks stay within their budget under the Triton interpreter (CPU) and within
memory on a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: predicted seconds of one derived case the CPU accepts (or 1.2x the fastest declared call).
CPU_CASE_CAP_S = 0.6
#: wall-clock limit of one derived call on the CPU (a call past it is dropped, not charged).
CPU_CALL_LIMIT_S = 2.0
#: the largest derived problem (product of the integer parameters) run on a GPU.
GPU_MAX_ELEMENTS = 1 << 27


def elements(case: dict[str, Any], params: list[str]) -> int:
    """The product of a case's integer shape parameters (the size of the problem)."""
    n = 1
    for p in params:
        n *= max(1, int(case[p]))
    return n


def cost_units(case: dict[str, Any], params: list[str]) -> int:
    """The cost proxy of a case: the product of its integer parameters, each rounded up to
    a multiple of 16 (tiled kernels pay for whole tiles: a 1 x 8 problem is not 8 times
    cheaper than a 16 x 16 one)."""
    n = 1
    for p in params:
        n *= -(-max(1, int(case[p])) // 16) * 16
    return n


@dataclass
class CostModel:
    """Predicted candidate seconds of a case: ``a + b * elements``, fitted on the declared
    cases' measured call times (conservatively: ``b`` is the largest per-element cost seen,
    times 1.5 for block padding, rounded up to a power of two so that the plan is stable
    under timing noise). On a GPU the model only caps elements."""

    a: float
    b: float
    on_gpu: bool
    cap_s: float = 0.0

    @classmethod
    def fit(cls, points: list[tuple[int, float]], on_gpu: bool) -> CostModel:
        pts = [(n, t) for n, t in points if n > 0 and t > 0]
        if not pts:
            return cls(0.02, 2e-6, on_gpu, CPU_CASE_CAP_S)
        tmin = min(t for _, t in pts)
        a = 0.5 * tmin  # per-call overhead (launch, autotuning) is size-independent
        b = max(max((t - a) / n for n, t in pts), 1e-9) * 1.5
        # rounded up to a power of two so that timing noise rarely changes the plan; a
        # kernel whose smallest declared call is already slow (autotuning) may take as
        # long per derived case
        return cls(a, 2.0 ** math.ceil(math.log2(b)), on_gpu, max(CPU_CASE_CAP_S, 1.2 * tmin))

    def seconds(self, n: int) -> float:
        """Predicted seconds for ``n`` cost units (:func:`cost_units`)."""
        return self.a + self.b * n

    @property
    def call_limit_s(self) -> float:
        """Wall-clock limit of one derived call on the CPU: :data:`CPU_CALL_LIMIT_S`, or
        2.5x the fastest declared call where that is slower (``a`` is half of it)."""
        return max(CPU_CALL_LIMIT_S, 5.0 * self.a)

    def fits(self, case: dict[str, Any], params: list[str]) -> bool:
        """Whether one case is within the per-case cap (CPU: predicted seconds; GPU: elements)."""
        if self.on_gpu:
            return elements(case, params) <= GPU_MAX_ELEMENTS
        return self.seconds(cost_units(case, params)) <= (self.cap_s or CPU_CASE_CAP_S)
