"""The static CUDA reading of cuda-build: PTX data/control flow (support/ptx_flow.py) and host
launch arithmetic (support/cuda_launch.py), on real nvcc output kept in tests/cuda_ptx/."""

from __future__ import annotations

from pathlib import Path

import pytest

from workstation.checks.support.cuda_launch import legal_values, read_launches
from workstation.checks.support.ptx_flow import (
    accumulation_loops,
    approx_ops,
    bounds_guards,
    parse_ptx,
    shared_races,
)
from workstation.task.model import ParamSpec

DATA = Path(__file__).parent / "cuda_ptx"


def _progs(name: str) -> dict:
    progs = parse_ptx((DATA / f"{name}.ptx").read_text(), f"{name}.cu")
    return {k.split("_Z", 1)[-1].lstrip("0123456789").split("P")[0] if k.startswith("_Z") else k: v
            for k, v in progs.items()}


def _by(progs: dict, stem: str):
    return next(v for k, v in progs.items() if stem in v.name)


def test_missing_barrier_in_a_tree_reduction_is_a_race_with_both_source_lines():
    races = shared_races(_by(_progs("racy"), "rowsoftmax"))
    assert races, "the store -> load of part[t + s] with no bar.sync was not seen"
    first = races[0]
    assert first["store"]["line"] == 7 and first["load"]["line"] == 9  # red[t] = m; ... red[t + s]
    assert "st.shared" in first["store"]["ptx"] and "ld.shared" in first["load"]["ptx"]


def test_a_barrier_after_every_step_is_no_race():
    assert shared_races(_by(_progs("guarded"), "sum_sync")) == []


def test_the_64_bit_remainder_branch_is_not_a_bounds_guard():
    g = bounds_guards(_by(_progs("racy"), "scale"))
    assert g["indexed_accesses"] == 2 and g["unguarded"] == 2
    assert g["guard_comparisons"] == []


def test_an_index_compared_against_a_parameter_guards_what_it_skips():
    g = bounds_guards(_by(_progs("guarded"), "scale_guarded"))
    assert g["indexed_accesses"] == 2 and g["unguarded"] == 0
    assert any("setp" in c["ptx"] for c in g["guard_comparisons"])
    loop = bounds_guards(_by(_progs("racy"), "rowsoftmax"))  # grid-stride loops behind c < C
    assert loop["unguarded"] == 0


def test_fast_math_intrinsics_are_read_with_their_source_lines():
    ops = {o["op"]: o["line"] for o in approx_ops(_by(_progs("racy"), "rowsoftmax"))}
    assert ops.get("tanh.approx.f32") == 14 and ops.get("ex2.approx.ftz.f32") == 13


def test_accumulation_loop_reads_its_step_and_bound_parameter():
    p = _by(_progs("racy"), "rowsoftmax")
    adds = [i.idx for i in p.instrs if i.op == "add.ftz.f32"]
    loops = accumulation_loops(p, adds)
    assert loops and loops[0]["param"] == 3 and loops[0]["step"] == "block"  # c < C, c += blockDim.x


@pytest.mark.parametrize(("grid", "counter"), [("n / 256", 1), ("(n + 255) / 256", None), ("n / 256 + 1", None),
                                               ("(n + 127) / 256", 1)])
def test_launch_coverage_over_the_legal_sizes(grid, counter):
    text = (DATA / "racy.cu").read_text().replace("n / 256", grid)
    sites = read_launches([text], {"n": ParamSpec(min=1, max=1 << 20)}, {})
    (dim,) = sites[0]["dims"]
    assert dim["divisor"] == 256
    got = dim["counterexample"]
    assert (got and got["n"]) == counter


def test_launch_reads_dim3_and_defines_and_respects_multiple_of():
    text = """#define TILE 32
    void go(int M, int N) { dim3 block(TILE, TILE); dim3 grid(N / TILE, (M + TILE - 1) / TILE);
    k<<<grid, block>>>(M, N); }"""
    params = {"M": ParamSpec(min=1, max=4096), "N": ParamSpec(min=32, max=4096, multiple_of=32)}
    dims = read_launches([text], params, {})[0]["dims"]
    assert [d["counterexample"] for d in dims] == [None, None]
    params["N"] = ParamSpec(min=1, max=4096)
    dims = read_launches([text], params, {})[0]["dims"]
    assert dims[0]["counterexample"]["N"] == 1 and dims[1]["counterexample"] is None


def test_an_unknown_name_in_a_launch_is_reported_unresolved():
    dims = read_launches(["void f(torch::Tensor x) { k<<<blocks_for(x), 256>>>(); }"], {"n": ParamSpec(min=1)},
                         {})[0]["dims"]
    assert "unresolved" in dims[0]


def test_legal_values_stay_legal():
    spec = ParamSpec(min=3, max=5000, multiple_of=3)
    vals = legal_values(spec)
    assert vals and all(spec.allows(v) for v in vals) and vals[0] == 3 and vals[-1] == 4998


def test_a_method_call_in_a_launch_is_named_as_c_not_as_a_parse_tree():
    dims = read_launches(["void f(torch::Tensor x) { k<<<x.size(0), 256>>>(); }"], {"n": ParamSpec(min=1)},
                         {})[0]["dims"]
    assert "a call to x.size()" in dims[0]["unresolved"] and "ID(" not in dims[0]["unresolved"]


def test_a_toolkit_header_missing_here_is_this_machines_limit_not_the_candidates():
    from workstation.checks.cuda_build import missing_header

    log = ("/site-packages/torch/include/ATen/cuda/CUDAContextLight.h:10:10: fatal error: cusparse.h: "
           "No such file or directory\ncompilation terminated.\n")
    assert missing_header(log, {"candidate.py", "task.toml"}) == "cusparse.h"
    own = "/kws/job/task/kern.cu:3:10: fatal error: tile.cuh: No such file or directory\n"
    assert missing_header(own, {"kern.cu", "include/tile.cuh"}) is None  # shipped: a real compile error
    assert missing_header("kern.cu(4): error: identifier \"x\" is undefined\n", set()) is None
