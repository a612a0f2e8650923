"""Derived shape variants that tell the sizes apart (support/ragged.shape_variants, read by
pallas-kernel) and the fallback scan's reading of jax's own Pallas ops (support/static.py)."""

from __future__ import annotations

from pathlib import Path

from workstation.checks.support.ragged import shape_variants
from workstation.checks.support.static import scan_fallback
from workstation.task.model import ParamSpec
from workstation.task.sources import TaskSources


def test_each_size_moves_alone_and_one_variant_has_all_sizes_distinct():
    params = {"R": ParamSpec(min=1, max=2048), "C": ParamSpec(min=1, max=2048)}
    got = shape_variants({"R": 32, "C": 32, "dtype": "float32"}, params)
    assert {"R": 33, "C": 32, "dtype": "float32"} in got
    assert {"R": 32, "C": 33, "dtype": "float32"} in got
    assert any(v["R"] != v["C"] and v["R"] % 32 == 0 and v["C"] % 32 == 0 for v in got)
    assert all(all(params[k].allows(v[k]) for k in params) for v in got)


def test_variants_stay_legal_under_multiple_of_and_choices():
    params = {"M": ParamSpec(min=16, max=64, multiple_of=16), "K": ParamSpec(choices=(64, 128))}
    got = shape_variants({"M": 32, "K": 64, "dtype": "float16"}, params)
    assert got and all(params["M"].allows(v["M"]) and params["K"].allows(v["K"]) for v in got)


def test_a_single_size_gets_its_ragged_variant_only():
    assert shape_variants({"n": 256, "dtype": "float32"}, {"n": ParamSpec(min=1, max=4096)}) == [
        {"n": 257, "dtype": "float32"}]


def test_jax_pallas_op_module_function_is_not_a_tensor_method(tmp_path: Path):
    (tmp_path / "c.py").write_text(
        "from jax.experimental.pallas.ops.tpu import matmul as mm_op\n"
        "def f(x, y):\n"
        "    return mm_op.matmul(x, y) + x.matmul(y)\n")
    hits = scan_fallback(TaskSources(tmp_path), "c.py", "f", None).hits
    assert [h.text for h in hits if h.kind == "method"] == ["x.matmul(y)"]
