"""The ``bounds-proof`` encoder and launch model on small hand-written TTIR (no task code, no
Triton): proved, refuted and unsupported accesses, loop inductions, coverage, template
fitting, the sampled shapes."""

from __future__ import annotations

import z3

from workstation.checks.bounds_proof import SAMPLE_ELEMENTS, sample_cases
from workstation.checks.support.boundsmodel import Formula, Slot, fit, fit_one, prove_kernel
from workstation.checks.support.ttir_z3 import parse_ttir, strip_loc
from workstation.protocol.extras.triton import BoundsCall, BoundsCase
from workstation.task.model import ParamSpec

# a 1-D element-wise kernel: offs = pid * 1024 + arange(1024); load x[offs] (mask offs < n);
# store y[offs] with mask offs < %bound (the bound is a kernel argument: n, or n rounded up)
ELEMENTWISE = """\
module {
  tt.func public @k(%x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc)), %y_ptr: !tt.ptr<f16>, %n: i32, %bound: i32) {
    %c1024 = arith.constant 1024 : i32 loc(#loc2)
    %pid = tt.get_program_id x : i32 loc(#loc2)
    %base = arith.muli %pid, %c1024 : i32
    %r = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %b = tt.splat %base : i32 -> tensor<1024xi32>
    %offs = arith.addi %b, %r : tensor<1024xi32>
    %ns = tt.splat %n : i32 -> tensor<1024xi32>
    %m = arith.cmpi slt, %offs, %ns : tensor<1024xi32>
    %xp = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %xa = tt.addptr %xp, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %x = tt.load %xa, %m : tensor<1024x!tt.ptr<f32>>
    %h = arith.truncf %x : tensor<1024xf32> to tensor<1024xf16>
    %bs = tt.splat %bound : i32 -> tensor<1024xi32>
    %sm = arith.cmpi slt, %offs, %bs : tensor<1024xi32>
    %yp = tt.splat %y_ptr : !tt.ptr<f16> -> tensor<1024x!tt.ptr<f16>>
    %ya = tt.addptr %yp, %offs : tensor<1024x!tt.ptr<f16>>, tensor<1024xi32>
    tt.store %ya, %h, %sm : tensor<1024x!tt.ptr<f16>> loc(#loc2)
    tt.return
  }
}
#loc2 = loc("/t/candidate.py":12:4)
"""

N = ParamSpec(min=1, max=1 << 20)


def _f(kind: str, *params: str, c: int = 1) -> Formula:
    return Formula(kind, tuple(params), c)


def _vec(output: int | None) -> dict:
    return {"footprint": _f("scale", "n"), "sizes": [_f("scale", "n")], "strides": [_f("const", c=1)],
            "output": output, "dtype": "float32"}


def _slot(bound: Formula, grid: Formula | None = None) -> Slot:
    return Slot("k", {}, [grid or _f("cdiv", "n", c=1024), _f("const", c=1), _f("const", c=1)],
                {"n": _f("scale", "n"), "bound": bound}, {"x_ptr": _vec(None), "y_ptr": _vec(0)})


def _by(vs, question, status=None):
    return [v for v in vs if v.question == question and (status is None or v.status == status)]


def test_parse_reads_arguments_ops_and_source_lines():
    k = parse_ttir(ELEMENTWISE)
    assert k.name == "k"
    assert [a for a, _ in k.args] == ["x_ptr", "y_ptr", "n", "bound"]
    assert k.body[1].name == "tt.get_program_id" and k.body[1].line == 12
    assert strip_loc('%a = arith.addi %b, %c : i32 loc("f"(#loc3))') == "%a = arith.addi %b, %c : i32"


def test_masked_elementwise_kernel_is_proved_in_bounds_and_covering():
    vs, n = prove_kernel(ELEMENTWISE, _slot(_f("scale", "n")), ["n"], {"n": N}, None)
    assert n == 2
    assert len(_by(vs, "in-bounds", "proved")) == 2
    assert [v.status for v in _by(vs, "coverage")] == ["proved"]


def test_store_mask_rounded_up_to_vectors_is_refuted_with_a_small_shape():
    vs, _ = prove_kernel(ELEMENTWISE, _slot(_f("roundup", "n", c=8)), ["n"], {"n": N}, None)
    (bad,) = _by(vs, "in-bounds", "refuted")
    assert bad.access == "store y_ptr" and bad.line == 12
    ce = bad.counterexample
    assert ce["params"]["n"] % 8 != 0 and ce["params"]["n"] <= 16  # the smallest box first
    assert ce["offset"] >= ce["footprint"] == ce["params"]["n"]
    # multiples of 8 are safe: the same kernel over n % 8 == 0 is proved
    safe = ParamSpec(min=8, max=1 << 20, multiple_of=8)
    vs, _ = prove_kernel(ELEMENTWISE, _slot(_f("roundup", "n", c=8)), ["n"], {"n": safe}, None)
    assert not _by(vs, "in-bounds", "refuted") and len(_by(vs, "in-bounds", "proved")) == 2


def test_grid_rounded_down_leaves_the_tail_unwritten():
    vs, _ = prove_kernel(ELEMENTWISE, _slot(_f("scale", "n"), grid=Formula("scale", ("n",), 1)), ["n"], {"n": N},
                         None)
    assert len(_by(vs, "in-bounds", "proved")) == 2  # more programs than needed: masked, safe
    short = Slot("k", {}, [Formula("const", (), 1), _f("const", c=1), _f("const", c=1)],
                 {"n": _f("scale", "n"), "bound": _f("scale", "n")}, {"x_ptr": _vec(None), "y_ptr": _vec(0)})
    vs, _ = prove_kernel(ELEMENTWISE, short, ["n"], {"n": N}, None)
    (cov,) = _by(vs, "coverage")
    assert cov.status == "refuted"
    ce = cov.counterexample
    assert ce["params"]["n"] > 1024 and ce["element"][0] >= 1024


DATA_MASK = ELEMENTWISE.replace(
    "    tt.store %ya, %h, %sm : tensor<1024x!tt.ptr<f16>> loc(#loc2)",
    "    %zero = arith.constant dense<0.0> : tensor<1024xf32>\n"
    "    %pos = arith.cmpf ogt, %x, %zero : tensor<1024xf32>\n"
    "    %sm2 = arith.andi %sm, %pos : tensor<1024xi1>\n"
    "    tt.store %ya, %h, %sm2 : tensor<1024x!tt.ptr<f16>>")


def test_store_mask_on_loaded_data_leaves_elements_unwritten_for_some_data():
    vs, _ = prove_kernel(DATA_MASK, _slot(_f("scale", "n")), ["n"], {"n": N}, None)
    assert len(_by(vs, "in-bounds", "proved")) == 2  # still in bounds whatever the data
    (cov,) = _by(vs, "coverage")
    assert cov.status == "refuted" and cov.data_dependent


GATHER = ELEMENTWISE.replace(
    "    %ya = tt.addptr %yp, %offs : tensor<1024x!tt.ptr<f16>>, tensor<1024xi32>",
    "    %i = arith.fptosi %x : tensor<1024xf32> to tensor<1024xi32>\n"
    "    %ya = tt.addptr %yp, %i : tensor<1024x!tt.ptr<f16>>, tensor<1024xi32>")

ATOMIC = ELEMENTWISE.replace(
    "    tt.store %ya, %h, %sm : tensor<1024x!tt.ptr<f16>> loc(#loc2)",
    "    %old = tt.atomic_rmw fadd, acq_rel, gpu, %ya, %h, %sm : (tensor<1024x!tt.ptr<f16>>, tensor<1024xf16>, "
    "tensor<1024xi1>) -> tensor<1024xf16>")


def test_data_dependent_index_and_atomics_are_unsupported_never_proved():
    vs, _ = prove_kernel(GATHER, _slot(_f("scale", "n")), ["n"], {"n": N}, None)
    uns = [v for v in vs if v.status == "unsupported"]
    assert uns and "fptosi" in uns[0].access
    assert not _by(vs, "coverage", "proved")
    vs, _ = prove_kernel(ATOMIC, _slot(_f("scale", "n")), ["n"], {"n": N}, None)
    assert any("atomics" in v.access for v in vs if v.status == "unsupported")


# row sums: for kb in range(K // 128): load x[row * K + kb * 128 + arange(128)], an
# induction on the pointer (p += 128) whose trip count cdiv(K, 128) would read past the end
LOOP = """\
module {
  tt.func public @rows(%x_ptr: !tt.ptr<f32>, %out_ptr: !tt.ptr<f32>, %K: i32, %trips: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %acc = arith.constant 0.0 : f32
    %row = tt.get_program_id x : i32
    %rk = arith.muli %row, %K : i32
    %p0 = tt.addptr %x_ptr, %rk : !tt.ptr<f32>, i32
    %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %ps = tt.splat %p0 : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>>
    %pv = tt.addptr %ps, %r : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
    %res:2 = scf.for %kb = %c0 to %trips step %c1 iter_args(%a = %acc, %p = %pv) -> (f32, tensor<128x!tt.ptr<f32>>)  : i32 {
      %x = tt.load %p : tensor<128x!tt.ptr<f32>>
      %inc = tt.splat %c128 : i32 -> tensor<128xi32>
      %pn = tt.addptr %p, %inc : tensor<128x!tt.ptr<f32>>, tensor<128xi32>
      %an = arith.addf %a, %a : f32
      scf.yield %an, %pn : f32, tensor<128x!tt.ptr<f32>>
    }
    %o = tt.addptr %out_ptr, %row : !tt.ptr<f32>, i32
    tt.store %o, %res#0 : !tt.ptr<f32>
    tt.return
  }
}
"""


def _rows_slot(trips: Formula) -> Slot:
    mk = {"footprint": _f("scale", "M", "K"), "sizes": [_f("scale", "M"), _f("scale", "K")],
          "strides": [_f("scale", "K"), _f("const", c=1)], "output": None, "dtype": "float32"}
    m = {"footprint": _f("scale", "M"), "sizes": [_f("scale", "M")], "strides": [_f("const", c=1)], "output": 0,
         "dtype": "float32"}
    return Slot("rows", {}, [_f("scale", "M"), _f("const", c=1), _f("const", c=1)],
                {"K": _f("scale", "K"), "trips": trips}, {"x_ptr": mk, "out_ptr": m})


def test_loop_pointer_induction_is_followed():
    specs = {"M": ParamSpec(min=1, max=4096), "K": ParamSpec(min=1, max=4096)}
    # K a multiple of 128 and trips = K / 128: proved
    mult = {"M": specs["M"], "K": ParamSpec(min=128, max=4096, multiple_of=128)}
    vs, n = prove_kernel(LOOP, _rows_slot(_f("cdiv", "K", c=128)), ["M", "K"], mult, None)
    assert n == 2 and len(_by(vs, "in-bounds", "proved")) == 2
    assert [v.status for v in _by(vs, "coverage")] == ["proved"]
    assert [v.status for v in _by(vs, "read-coverage")] == ["proved"]  # every element of x is read
    # one tile per row whatever K: in bounds, but the rest of each row is never read
    vs, _ = prove_kernel(LOOP, _rows_slot(_f("const", c=1)), ["M", "K"], mult, None)
    assert len(_by(vs, "in-bounds", "proved")) == 2
    (unread,) = _by(vs, "read-coverage")
    assert unread.status == "refuted" and unread.counterexample["element"][1] >= 128
    # any K with cdiv(K, 128) trips: the last tile reads past the end of the last row
    vs, _ = prove_kernel(LOOP, _rows_slot(_f("cdiv", "K", c=128)), ["M", "K"], specs, None)
    (bad,) = _by(vs, "in-bounds", "refuted")
    assert bad.access == "load x_ptr" and bad.counterexample["params"]["K"] % 128 != 0


def test_fit_one_finds_the_simplest_template():
    envs = [{"M": m, "N": n} for m, n in ((1, 1), (3, 1), (1, 37), (7, 13), (37, 5), (1, 1000), (5, 300))]
    assert fit_one([(e, 5) for e in envs], ["M", "N"]) == Formula("const", (), 5)
    assert fit_one([(e, e["M"] * e["N"]) for e in envs], ["M", "N"]).text() == "M*N"
    assert fit_one([(e, -(-e["N"] // 256)) for e in envs], ["M", "N"]).text() == "cdiv(N, 256)"
    assert fit_one([(e, -(-e["M"] // 8) * 8) for e in envs], ["M", "N"]).text() == "cdiv(M, 8)*8"
    npow = [(e, min(1 << (e["N"] - 1).bit_length(), 16)) for e in envs]
    assert fit_one(npow, ["M", "N"]).text() == "min(next_pow2(N), 16)"
    assert fit_one([(e, e["M"] ** 2 + 5 * e["N"]) for e in envs], ["M", "N"]) is None


def test_formula_z3_agrees_with_its_value():
    x = z3.Int("N")
    for f in (Formula("cdiv", ("N",), 64), Formula("roundup", ("N",), 8), Formula("npow2", ("N",), 0),
              Formula("npow2min", ("N",), 256), Formula("scale", ("N",), 3)):
        term = f.z3({"N": x}, 5000)
        for v in (1, 2, 63, 64, 65, 300, 4097):
            assert z3.simplify(z3.substitute(term, (x, z3.IntVal(v)))).as_long() == f.value({"N": v})


def test_fit_rejects_a_launch_sequence_that_changes_with_the_shape():
    import pytest

    from workstation.checks.support.boundsmodel import ModelError

    call = BoundsCall(qualname="k", grid=[1, 1, 1], args={})
    with pytest.raises(ModelError, match="launch sequence"):
        fit([{"n": 1}, {"n": 2}], [BoundsCase(launches=[call]), BoundsCase(launches=[call, call])], ["n"])


def test_sample_cases_are_legal_and_small():
    specs = {"M": ParamSpec(min=1, max=65536), "N": ParamSpec(min=16, max=8192, multiple_of=16)}
    cases = sample_cases({"M": 64, "N": 1024, "dtype": "float16"}, ["M", "N"], specs)
    assert len(cases) > 10
    for c in cases:
        assert c["dtype"] == "float16" and specs["M"].allows(c["M"]) and specs["N"].allows(c["N"])
        assert c["M"] * c["N"] <= SAMPLE_ELEMENTS
    assert max(c["N"] for c in cases) == 8192  # the maximum, where it fits
