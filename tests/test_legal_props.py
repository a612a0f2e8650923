"""Property tests (Hypothesis) of the legal parameter space: over generated ``[params]``
tables and declared cases that the task format admits, the legal-value derivation
(``checks/support/legal``, ``ragged``, ``case-coverage``'s targets, ``edge-shapes``'
derivation), snapping, the cost model and the shrinker never raise and only produce legal
values. Tables reach 0 (``min = 0`` with a declared 0: a padding count), 1, ``max = 2**62``,
``choices`` of one scalar type, ``multiple_of``, and unlisted parameters of mixed types.

The examples are derandomized (the same 200 on every run), so CI's verdict is a function of
the code; ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples (and 2000 of them) to
look for new counterexamples by hand."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workstation.checks.case_coverage import _targets, ragged_tail
from workstation.checks.edge_shapes import EdgeShapes
from workstation.checks.support.costmodel import GPU_MAX_ELEMENTS, CostModel, cost_units, elements
from workstation.checks.support.legal import (
    UNLISTED,
    halve,
    int_params,
    shrink_values,
    smallest,
    snap,
    value_plan,
)
from workstation.checks.support.ragged import ragged_case, ragged_value
from workstation.checks.support.shrink import shrink
from workstation.schema.problem import Problem
from workstation.task.format import ParamTable, _case_shape, _cases, _params
from workstation.task.model import Contract, ParamSpec

EXPLORE = os.environ.get("HYPOTHESIS_PROFILE") == "explore"
SETTINGS = settings(max_examples=2000 if EXPLORE else 200, derandomize=not EXPLORE, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TOML = Path("task.toml")
HUGE = 2**62
# interesting integers: 0, 1, small, block sizes and their neighbours, huge
ints = st.one_of(st.sampled_from([0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 1024, 1025, HUGE - 1, HUGE]),
                 st.integers(0, 4096), st.integers(0, HUGE))
scalars = st.one_of(st.lists(ints, min_size=1, max_size=6, unique=True),
                    st.lists(st.sampled_from(["a", "b", "pad", "auto"]), min_size=1, max_size=3, unique=True),
                    st.lists(st.sampled_from([0.5, 1.0, 2.5]), min_size=1, max_size=3, unique=True),
                    st.lists(st.booleans(), min_size=1, max_size=2, unique=True))


@st.composite
def param_table(draw: Any) -> ParamTable:
    if draw(st.booleans()) and draw(st.booleans()):
        return ParamTable(choices=draw(scalars))
    lo = draw(st.none() | ints)
    hi = draw(st.none() | ints)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    m = draw(st.none() | st.sampled_from([1, 2, 3, 8, 16, 128]) | st.integers(1, 1 << 20))
    return ParamTable(min=lo, max=hi, multiple_of=m)


def legal_draw(draw: Any, spec: ParamSpec) -> Any:
    """A legal value of ``spec`` (assume away a spec with none near where we look)."""
    if spec.choices is not None:
        return draw(st.sampled_from(spec.choices))
    raw = draw(ints)
    v = snap(raw, spec, draw(st.sampled_from(["down", "up", "nearest"])))
    assume(v is not None)
    return v


@st.composite
def task_space(draw: Any) -> tuple[dict[str, ParamSpec], list[dict[str, Any]]]:
    """Listed parameters (through the format's own validation) and declared cases the format
    admits, with some unlisted parameters (positive ints, or mixed with strings/bools)."""
    names = draw(st.lists(st.sampled_from(["M", "N", "K", "PAD", "B"]), min_size=0, max_size=3, unique=True))
    try:
        params = _params(TOML, {n: draw(param_table()) for n in names})
    except Problem:
        assume(False)
    unlisted = draw(st.lists(st.sampled_from(["U", "V", "MODE"]), max_size=2, unique=True))
    n_cases = draw(st.integers(1, 3))
    cases = []
    for _ in range(n_cases):
        case: dict[str, Any] = {"dtype": draw(st.sampled_from(["float32", "float16", "bfloat16"]))}
        for n in names:
            case[n] = legal_draw(draw, params[n])
        for u in unlisted:
            case[u] = draw(st.one_of(st.integers(1, 5000), st.sampled_from(["x", "y"]), st.booleans(),
                                     st.integers(1, HUGE)))
        cases.append(case)
    try:
        cases = _cases(TOML, cases, params, "cases")
        _case_shape(TOML, cases, "cases", [])
    except Problem:
        assume(False)
    return params, cases


def _assert_legal(case: dict[str, Any], params: list[str], specs: dict[str, ParamSpec]) -> None:
    for p in params:
        assert specs[p].allows(case[p]), (p, case[p], specs[p])


@SETTINGS
@given(space=task_space(), on_gpu=st.booleans(), configs=st.integers(1, 40), probe=ints)
def test_derivation_is_total_and_legal(space: Any, on_gpu: bool, configs: int, probe: int) -> None:
    params_spec, cases = space
    params = int_params(cases)
    for p in params:
        assert all(isinstance(c[p], int) and not isinstance(c[p], bool) for c in cases)
    specs = {p: params_spec.get(p, UNLISTED) for p in params}
    for p in params:
        spec = specs[p]
        declared = sorted({c[p] for c in cases})
        plan = value_plan(declared, spec)
        assert all(spec.allows(v.value) and v.value not in declared for v in plan), plan
        assert len({v.value for v in plan}) == len(plan)
        for way in ("down", "up", "nearest"):
            s = snap(probe, spec, way)
            assert s is None or spec.allows(s)
            if s is not None and way == "down":
                assert s <= probe
            if s is not None and way == "up":
                assert s >= probe
        for v in declared:
            sv = shrink_values(v, spec)
            assert all(spec.allows(w) and w < v for w in sv)
            h = halve(v, spec)
            assert h is None or (spec.allows(h) and h <= v // 2)
        least = smallest(spec)
        assert least is None or (spec.allows(least) and least <= min(declared))
        for _what, target in _targets(p, spec, max(declared)):
            assert spec.allows(target)
        tail = ragged_tail(spec, max(declared))
        assert tail is None or spec.allows(tail[0])
        r = ragged_value(max(probe, 1), spec)
        assert r is None or spec.allows(r)
    rc = ragged_case(cases[0], {p: specs[p] for p in params})
    if rc is not None:
        _assert_legal(rc, params, specs)
    cost = CostModel.plan(cases, params, on_gpu, configs)
    assert cost.max_cases >= 1 and cost.declared_max >= 16
    assert cost.shrink_trials is None or cost.shrink_trials >= 1
    cost.as_dict()
    for c in cases:
        assert cost_units(c, params) >= 1 and elements(c, params) >= 1
        cost.fits(c)
    # edge-shapes' derivation on a stand-in context (it reads only these attributes)
    task = SimpleNamespace(params=params_spec, contract=Contract())
    ctx = SimpleNamespace(task=task, cases=cases, on_gpu=on_gpu, derivation_seed=1)
    trials, left = EdgeShapes()._derive(ctx, params, cost)
    assert len(trials) <= cost.max_cases
    for t in trials:
        _assert_legal(t.case, params, specs)
        assert cost.fits(t.case, params)
    for t in left:
        _assert_legal(t.case, params, specs)
    if not on_gpu:
        assert sum(cost.units(t.case) for t in trials) <= cost.budget


@SETTINGS
@given(space=task_space(), threshold=ints)
def test_shrinking_stays_legal_and_keeps_the_failure(space: Any, threshold: int) -> None:
    """A synthetic defect (fails when every integer parameter is >= ``threshold``'s legal
    neighbour): the shrinker over :func:`shrink_values` candidates only visits legal cases,
    ends on a failing one, and never on a larger one than it started from."""
    params_spec, cases = space
    params = int_params(cases)
    assume(params)
    specs = {p: params_spec.get(p, UNLISTED) for p in params}
    start = max(cases, key=lambda c: elements(c, params))

    def fails(c: dict[str, Any]) -> bool:
        return all(c[p] >= min(threshold, start[p]) for p in params)

    def candidates(c: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**c, p: w} for p in params for w in shrink_values(c[p], specs[p])]

    visited: list[dict[str, Any]] = []

    def run(tries: Any) -> list[dict[str, Any]]:
        visited.extend(tries)
        return list(tries)

    size = lambda c: (elements(c, params), sum(c[p] for p in params))  # noqa: E731
    got = shrink(start, candidates=candidates, run=run, keeps_failure=fails, size=size,
                 cost=lambda c: 1.0, budget=16, max_rounds=6)
    for c in visited:
        _assert_legal(c, params, specs)
    assert fails(got.best) and size(got.best) <= size(start)
    assert got.path[0] is start and got.rounds <= 6


@pytest.mark.parametrize("declared", [[0], [0, 1], [0, 3], [1]])
def test_padding_count_zero_is_derived_from(declared: list[int]) -> None:
    """The issue-28 crash: ``min = 0`` with a declared 0 (math.log2(0) raised); 0 and 1 are
    edge values, the plan is legal and leaves the declared values to correctness."""
    spec = ParamSpec(min=0)
    plan = [v.value for v in value_plan(declared, spec)]
    assert plan and all(spec.allows(v) and v not in declared for v in plan)
    if 1 not in declared:
        assert 1 in plan
    assert shrink_values(5, spec)[:2] == [0, 1]
    assert smallest(spec) == 0 and halve(1, spec) == 0


def test_larger_case_from_a_declared_zero() -> None:
    """``_larger`` with the largest declared value 0 (it divided by it) names the case."""
    spec = ParamSpec(min=0)
    cases = [{"dtype": "float32", "PAD": 0, "N": 64}]
    cost = CostModel.plan(cases, ["PAD", "N"], False)
    got = EdgeShapes()._larger("PAD", cases, [0], {"PAD": spec, "N": UNLISTED}, ["PAD", "N"], cost)
    assert got is not None and got[0]["PAD"] == 1 and "above the largest declared PAD=0" in got[1]


def test_gpu_maximum_halves_to_legal_values() -> None:
    """On a GPU the [params] maximum (2**62) is halved to fit through legal values only."""
    specs = {"N": ParamSpec(min=0, max=HUGE, multiple_of=8)}
    cases = [{"dtype": "float32", "N": 64}]
    ctx = SimpleNamespace(task=SimpleNamespace(params=specs, contract=Contract()), cases=cases,
                          on_gpu=True, derivation_seed=1)
    cost = CostModel.plan(cases, ["N"], True)
    trials, _ = EdgeShapes()._derive(ctx, ["N"], cost)
    top = [t for t in trials if "maximum" in t.label]
    assert top and top[0].case["N"] <= GPU_MAX_ELEMENTS and specs["N"].allows(top[0].case["N"])
