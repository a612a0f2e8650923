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

``size-range`` goes further, across the whole legal range, so its cases need a model of
what the interpreter actually spends (:class:`RangeModel`): the Triton interpreter runs
every program of a launch one after the other in Python, so a case costs about its
elements plus a fixed overhead per program (measured on the sample kernels: 1-2 ms per
program, about what 1024 elements cost; 2^20 elements of an elementwise op in 1024-wide
blocks take about a CPU second). The programs of a case are counted, not guessed: a dry run
of the candidate's wrapper with every Triton launch recorded and skipped (the
``triton_bounds`` step without its TTIR) gives each launch's grid. Its **interpreter units**
are ``elements + RANGE_PROGRAM_UNITS x programs``; on the CPU a case may hold at most
:data:`RANGE_CPU_ELEMENTS` elements and :data:`RANGE_CPU_UNITS` units (or 2x the largest
declared case's, where that is more), all of them together :data:`RANGE_CPU_BUDGET` times
that. Still a count, never a measured time: the same cases on every machine.
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


#: size-range: the most elements (product of the integer parameters) of a case on the CPU.
RANGE_CPU_ELEMENTS = 1 << 20
#: size-range: the most interpreter units (elements + RANGE_PROGRAM_UNITS x programs) of a
#: case on the CPU: about 1-2 CPU seconds under the Triton interpreter.
RANGE_CPU_UNITS = 1 << 21
#: size-range: interpreter units one Triton program (or launch) costs beyond its elements.
RANGE_PROGRAM_UNITS = 1024
#: size-range: all cases together at most this many times the per-case units (CPU).
RANGE_CPU_BUDGET = 3
#: size-range: a drawn case (between the smallest and the largest) at most this share of
#: the per-case units (CPU): the largest cases are the expensive ones.
RANGE_DRAW_SHARE = 4
#: size-range: log-uniform draws besides the largest cases (CPU, GPU).
RANGE_CPU_DRAWS, RANGE_GPU_DRAWS = 3, 4
#: size-range: the most elements of a case on a GPU: its outputs, the reference's and the
#: float64 oracle's travel as float64 arrays, all of a job's cases within the result byte
#: budget (``KWS_RESULT_BYTES``, 768 MiB): 2^22 elements are 32 MiB an array.
RANGE_GPU_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class RangeModel:
    """The plan limits of ``size-range`` (module docstring): ``declared_elements`` and
    ``declared_units`` are the largest declared case's elements and interpreter units;
    ``interpreted``: the candidate's kernels run under the Triton interpreter (programs
    cost); ``autotune_configs`` as in :class:`CostModel` (each new shape re-tunes them all)."""

    params: tuple[str, ...]
    on_gpu: bool
    interpreted: bool = True
    declared_elements: int = 1
    declared_units: int = 1
    autotune_configs: int = 1

    def elements(self, case: dict[str, Any]) -> int:
        return elements(case, list(self.params))

    def units(self, case: dict[str, Any], programs: int) -> int:
        """Interpreter units of ``case`` with ``programs`` Triton programs (and launches)."""
        n = self.elements(case)
        return n + (RANGE_PROGRAM_UNITS * programs * self.autotune_configs if self.interpreted else 0)

    @property
    def max_elements(self) -> int:
        """The most elements of one case."""
        if self.on_gpu:
            return max(RANGE_GPU_ELEMENTS, CPU_CASE_CAP * self.declared_elements)
        return max(RANGE_CPU_ELEMENTS // self.autotune_configs, CPU_CASE_CAP * self.declared_elements)

    @property
    def max_units(self) -> int:
        """The most interpreter units of one case (elements on a GPU)."""
        if self.on_gpu:
            return self.max_elements
        return max(RANGE_CPU_UNITS, CPU_CASE_CAP * self.declared_units)

    @property
    def max_draw_units(self) -> int:
        """The most interpreter units of one drawn case."""
        return self.max_units if self.on_gpu else self.max_units // RANGE_DRAW_SHARE

    @property
    def budget(self) -> int | None:
        """All cases' units together (None: no limit but the case count, on a GPU)."""
        return None if self.on_gpu else RANGE_CPU_BUDGET * self.max_units

    @property
    def draws(self) -> int:
        """Log-uniform draws besides the largest cases."""
        return RANGE_GPU_DRAWS if self.on_gpu else RANGE_CPU_DRAWS

    def fits(self, case: dict[str, Any], programs: int | None = None) -> bool:
        """Within the per-case limits (elements; with ``programs`` known, also units)."""
        if self.elements(case) > self.max_elements:
            return False
        return programs is None or self.units(case, programs) <= self.max_units

    def as_dict(self) -> dict[str, Any]:
        """The model as evidence."""
        return {"unit": "elements (product of the integer parameters) + "
                        f"{RANGE_PROGRAM_UNITS} x Triton programs of the case's dry run"
                        + (f" x {self.autotune_configs} autotune configs" if self.autotune_configs > 1 else ""),
                "max_elements": self.max_elements, "max_units": self.max_units, "budget_units": self.budget,
                "interpreted": self.interpreted, "on_gpu": self.on_gpu, "draws": self.draws,
                "declared_max_elements": self.declared_elements, "declared_max_units": self.declared_units}
