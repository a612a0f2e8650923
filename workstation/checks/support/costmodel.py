"""The cost model of derived cases: how expensive a case is predicted to be, from its
parameters only, so the shape-varying checks stay within their budget under the Triton
interpreter (CPU) and within memory on a GPU, and pick the same cases on every machine.

Nothing here is measured: a plan fitted on measured call times changes with the load of
the machine (a busy machine gets fewer or smaller cases, so the findings of one task
version vary from run to run and a verdict cannot be re-checked exactly). Instead:

- a case's **cost units** are the product of its integer parameters, each rounded up to a
  multiple of 16 (:func:`cost_units`: tiled kernels pay for whole tiles);
- the **scale** is the task's own largest declared case (``declared_max`` units): the
  author's declared cases are the sizes the task is meant to run at, and ``correctness``
  runs each of them for every seed, so a derived case of that size is affordable by the
  task's own measure;
- on the CPU a derived case may cost at most :data:`CPU_CASE_CAP` times that scale, the
  whole plan at most :data:`CPU_BUDGET` times it, in at most :data:`CPU_MAX_CASES` cases;
  an autotuned candidate re-tunes every config at each new shape (``@triton.autotune``
  with ``key`` over the shape), so its case count is divided by its number of configs;
- on a GPU a case may hold at most :data:`GPU_MAX_ELEMENTS` elements, up to
  :data:`GPU_MAX_CASES` cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: a derived case's cost units at most this many times the largest declared case's (CPU).
CPU_CASE_CAP = 2
#: the derived cases' total cost units at most this many times the largest declared case's (CPU).
CPU_BUDGET = 24
#: derived cases on the CPU (before the autotune division).
CPU_MAX_CASES = 24
#: candidate calls a shrink may spend per failure class on the CPU (before the autotune division).
CPU_SHRINK_TRIALS = 16
#: the largest derived problem (product of the integer parameters) run on a GPU.
GPU_MAX_ELEMENTS = 1 << 27
#: derived cases on a GPU.
GPU_MAX_CASES = 48


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


@dataclass(frozen=True)
class CostModel:
    """The deterministic plan limits of one task (module docstring).

    ``declared_max``: cost units of the largest declared case; ``params``: the integer
    shape parameters; ``autotune_configs``: configs an autotuned candidate tries at each
    new shape (1 when it is not autotuned)."""

    declared_max: int
    params: tuple[str, ...]
    on_gpu: bool
    autotune_configs: int = 1

    @classmethod
    def plan(cls, declared: list[dict[str, Any]], params: list[str], on_gpu: bool,
             autotune_configs: int = 1) -> CostModel:
        top = max((cost_units(c, params) for c in declared), default=16)
        return cls(max(16, top), tuple(params), on_gpu, max(1, autotune_configs))

    def units(self, case: dict[str, Any]) -> int:
        return cost_units(case, list(self.params))

    @property
    def case_cap(self) -> int:
        """The most cost units one derived case may have on the CPU."""
        return CPU_CASE_CAP * self.declared_max

    @property
    def budget(self) -> int:
        """The most cost units all derived cases may have together on the CPU."""
        return CPU_BUDGET * self.declared_max

    @property
    def max_cases(self) -> int:
        """How many derived cases run."""
        if self.on_gpu:
            return GPU_MAX_CASES
        return max(3, CPU_MAX_CASES // self.autotune_configs)

    @property
    def shrink_trials(self) -> int | None:
        """Candidate calls a shrink may spend (None: no limit but the rounds, on a GPU)."""
        return None if self.on_gpu else max(4, CPU_SHRINK_TRIALS // self.autotune_configs)

    def fits(self, case: dict[str, Any], params: list[str] | None = None) -> bool:
        """Whether one case is within the per-case cap (CPU: cost units; GPU: elements)."""
        ps = list(self.params) if params is None else params
        if self.on_gpu:
            return elements(case, ps) <= GPU_MAX_ELEMENTS
        return cost_units(case, ps) <= self.case_cap

    def as_dict(self) -> dict[str, Any]:
        """The model as evidence."""
        return {"unit": "product of the integer parameters, each rounded up to 16", "declared_max_units":
                self.declared_max, "case_cap_units": None if self.on_gpu else self.case_cap,
                "budget_units": None if self.on_gpu else self.budget, "max_cases": self.max_cases,
                "autotune_configs": self.autotune_configs, "on_gpu": self.on_gpu,
                "gpu_max_elements": GPU_MAX_ELEMENTS if self.on_gpu else None}
