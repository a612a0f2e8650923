"""The backend readings without a runner: ptxas/PTX/SASS text (cuda_read), NKI source
(nki_read), ragged sizes, role backends and what can run where, the roles a step runs."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import SAMPLE_QUEUE, TASK_TOML, write_task
from workstation.checks.support.cuda_read import (
    block_sizes,
    guard_facts,
    occupancy,
    precision_facts,
    ptx_entries,
    ptxas_resources,
    sass_functions,
)
from workstation.checks.support.nki_read import read_nki
from workstation.checks.support.ragged import is_ragged, ragged_case, ragged_value
from workstation.protocol.steps import (
    AuthorBenchStep,
    CallStep,
    CudaBuildStep,
    NumOracleStep,
    PallasReadStep,
    TimingSide,
    TimingStep,
    step_roles,
)
from workstation.schema.problem import Problem
from workstation.task.backends import backend_mismatch, cannot_run, imported_backend, role_backend
from workstation.task.format import load_task
from workstation.task.model import ParamSpec
from workstation.task.sources import TaskSources

PTXAS_LOG = """\
ptxas info    : 28 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmPK6__halfS1_PS_iii' for 'sm_90'
ptxas info    : Function properties for _Z4gemmPK6__halfS1_PS_iii
    16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function '_Z4copyPfS_i' for 'sm_90'
ptxas info    : Function properties for _Z4copyPfS_i
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 372 bytes cmem[0]
"""

SASS = """\
\t\tFunction : _Z4copyPfS_i
        /*0000*/                   LDC R1, c[0x0][0x28] ;                /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                    /* 0x0000000000007919 */
        /*0020*/                   LDG.E R3, desc[UR4][R2.64] ;          /* 0x0000000402037981 */
        /*0030*/                   STG.E desc[UR4][R4.64], R3 ;          /* 0x0000000304007986 */
        /*0040*/                   EXIT ;                                /* 0x000000000000794d */
\t\tFunction : _Z5guardPfS_i
        /*0000*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x220], PT ;  /* 0x000088000000780c */
        /*0010*/               @P0 EXIT ;                                /* 0x000000000000094d */
        /*0020*/                   LDG.E R3, desc[UR4][R2.64] ;          /* 0x0000000402037981 */
        /*0030*/                   HMMA.1684.F32.TF32 R4, R8, R12, R4 ;  /* 0x000000000c04723c */
        /*0040*/                   HFMA2.MMA R5, -RZ, RZ, 0, 0 ;         /* 0x00000000ff057435 */
        /*0050*/                   STG.E desc[UR4][R4.64], R3 ;          /* 0x0000000304007986 */
"""

PTX = """\
.visible .entry _Z4halfP6__halfi(
\t.param .u64 _Z4halfP6__halfi_param_0
)
.maxntid 256, 1, 1
{
\tmov.u32 %r1, 0;
$L__BB0_1:
\tfma.rn.f16 %rs3, %rs1, %rs2, %rs3;
\tadd.s32 %r1, %r1, 1;
\tsetp.lt.s32 %p1, %r1, %r2;
\t@%p1 bra $L__BB0_1;
\tadd.f16 %rs4, %rs3, %rs3;
\tret;
}
"""


def test_ptxas_resources_per_kernel():
    res = ptxas_resources(PTXAS_LOG)
    g = res["_Z4gemmPK6__halfS1_PS_iii"]
    assert (g.registers, g.barriers, g.smem, g.cmem) == (72, 1, 8192, 400)
    assert (g.stack, g.spill_stores, g.spill_loads) == (16, 24, 20)
    c = res["_Z4copyPfS_i"]
    assert (c.registers, c.smem, c.spill_stores) == (8, 0, 0)


def test_sass_guards_and_tensor_core_ops():
    fns = sass_functions(SASS)
    assert set(fns) == {"_Z4copyPfS_i", "_Z5guardPfS_i"}
    copy = guard_facts(fns["_Z4copyPfS_i"])
    assert copy["global_accesses"] == 2 and not copy["any_guard"] and copy["unguarded"] == 2
    guarded = guard_facts(fns["_Z5guardPfS_i"])
    assert guarded["any_guard"] and guarded["guarded"] == 2 and guarded["unguarded"] == 0
    prec = precision_facts(None, fns["_Z5guardPfS_i"])
    assert prec["tf32"]["sass"] == ["HMMA.1684.F32.TF32"]
    assert "HFMA2.MMA" not in prec["mma_ops"]  # the register-zeroing idiom is no tensor-core op


def test_ptx_half_arithmetic_inside_a_loop_and_launch_bounds():
    ent = ptx_entries(PTX)["_Z4halfP6__halfi"]
    assert ent.directives[".maxntid"] == [256, 1, 1]
    prec = precision_facts(ent, [])
    inside = [h for h in prec["half_arith"] if h["in_loop"]]
    outside = [h for h in prec["half_arith"] if not h["in_loop"]]
    assert len(inside) == 1 and "fma.rn.f16" in inside[0]["ptx"]
    assert len(outside) == 1 and "add.f16" in outside[0]["ptx"]
    assert block_sizes("", ent) == (256, ".maxntid [256, 1, 1] (__launch_bounds__)")


def test_block_size_from_the_host_source():
    src = "#define TILE 32\nvoid f() { dim3 block(TILE, TILE); k<<<grid, block, 0, s>>>(x); }\n"
    assert block_sizes(src, None)[0] == 1024
    assert block_sizes("void f() { k<<<g, 128>>>(x); }", None)[0] == 128
    assert block_sizes("void f(int t) { k<<<g, t>>>(x); }", None)[0] is None


def test_occupancy_on_sm90():
    full = occupancy(32, 8192, 1024)
    assert full["launchable"] and full["occupancy"] == 1.0
    # 72 registers x 1024 threads = 73728 > 65536 registers per SM: the launch fails
    assert not occupancy(72, 0, 1024)["launchable"]
    half = occupancy(128, 0, 256)  # 128 x 32 = 4096 per warp, 8 warps: 2 blocks of 8 warps
    assert half["blocks_per_sm"] == 2 and half["occupancy"] == 0.25 and half["limited_by"] == "registers"
    smem = occupancy(32, 100 * 1024, 128)
    assert smem["blocks_per_sm"] == 2 and smem["limited_by"] == "shared memory"


def test_ragged_values():
    assert ragged_value(2, ParamSpec(min=1, max=100)) == 3
    assert ragged_value(64, ParamSpec(min=1, max=100, multiple_of=8)) == 72  # 9 x 8: no block of 16 divides it
    assert is_ragged(72, ParamSpec(multiple_of=8)) and not is_ragged(64, ParamSpec(multiple_of=8))
    assert ragged_value(8, ParamSpec(choices=(8, 16, 33))) == 33
    assert ragged_value(8, ParamSpec(choices=(8, 16, 24))) is None  # no odd choice
    assert ragged_value(5, ParamSpec(min=1, max=2)) is None
    case = {"M": 64, "N": 33, "dtype": "float16", "fast": True}
    got = ragged_case(case, {"M": ParamSpec(min=1, max=4096)})
    assert got == {"M": 65, "N": 33, "dtype": "float16", "fast": True}  # N is already ragged


def test_nki_reading_of_the_samples():
    for task_id, psum in (("matmul-nki", "float32"), ("matmul-nki-bf16psum", "bfloat16")):
        sf = TaskSources(SAMPLE_QUEUE / "tasks" / task_id).file("candidate.py")
        (k,) = read_nki(sf)
        assert k.name == "matmul_kernel"
        assert k.tiles["acc"]["buffer"] == "psum" and k.tiles["acc"]["dtype"] == psum
        assert [lp["form"] for lp in k.loops] == ["ceil", "ceil", "ceil"]
        assert all(a["mask"] for a in k.accesses) and len(k.accesses) == 3
        (acc,) = k.accumulations
        assert acc["tile"] == "acc" and acc["dtype"] == psum and acc["in_loops"] == [0, 1, 2]


def test_nki_unmasked_ragged_load_and_floor_loop(tmp_path):
    (tmp_path / "k.py").write_text(textwrap.dedent("""\
        import math
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.jit
        def kernel(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            for i in nl.affine_range(math.ceil(x.shape[0] / 128)):
                t = nl.load(x[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
                s = nl.sum(t, axis=1, dtype=nl.bfloat16)
                nl.store(out[i * 128], value=t)
            for j in nl.affine_range(x.shape[1] // 512):
                pass
            return out
        """))
    (k,) = read_nki(TaskSources(tmp_path).file("k.py"))
    assert [lp["form"] for lp in k.loops] == ["ceil", "floor"]
    assert [a["mask"] for a in k.accesses] == [False, False]
    assert k.reductions[0]["dtype"] == "bfloat16"


def test_role_backends_of_the_samples():
    t = load_task(SAMPLE_QUEUE / "tasks" / "rmsnorm-pallas2triton")
    assert role_backend(t, "candidate") == "triton" and role_backend(t, "baseline") == "pallas"
    assert role_backend(t, "reference") == "torch" and role_backend(t, "bench") is None
    g = load_task(SAMPLE_QUEUE / "tasks" / "gemm-cuda2triton")
    assert role_backend(g, "baseline") == "cuda"
    n = load_task(SAMPLE_QUEUE / "tasks" / "matmul-nki")
    assert role_backend(n, "candidate") == "nki" and role_backend(n, "baseline") == "triton"


def test_a_dead_import_does_not_decide_the_backend(tmp_path):
    # a reference that mentions neuronxcc only under `if False:` is the torch its task declares
    d = write_task(tmp_path)
    (d / "reference.py").write_text("if False:\n    import neuronxcc\n\ndef add(x, y):\n    return x + y\n")
    t = load_task(d)
    assert role_backend(t, "reference") == "torch" and role_backend(t, "candidate") == "torch"
    assert cannot_run(role_backend(t, "reference"), "cpu", {}) is None
    assert imported_backend(t, "reference") == "nki"
    note = backend_mismatch(t, "reference")
    assert note is not None and "suggest nki" in note and "kws runs it as torch" in note
    assert backend_mismatch(t, "candidate") is None and role_backend(t, "baseline") is None


def test_backends_table_declares_other_roles(tmp_path):
    d = write_task(tmp_path, toml=TASK_TOML.format(id="add", status="pass", failure_class="").replace(
        'inputs = "inputs.py:make_inputs"', 'inputs = "inputs.py:make_inputs"\nbaseline = "candidate.py:add"')
        + '\n[backends]\nbaseline = "cuda"\n')
    t = load_task(d)
    assert role_backend(t, "baseline") == "cuda" and role_backend(t, "reference") == "torch"
    assert "CUDA GPU" in cannot_run(role_backend(t, "baseline"), "cpu", {})


@pytest.mark.parametrize(("table", "key", "words"), [
    ('[backends]\nbaseline = "metal"\n', "backends.baseline", "unknown value 'metal'"),
    ('[backends]\nbench = "triton"\n', "backends.bench", "no entry.bench"),
])
def test_backends_table_problems_name_the_key(tmp_path, table, key, words):
    d = write_task(tmp_path, toml=TASK_TOML.format(id="add", status="pass", failure_class="").replace(
        'inputs = "inputs.py:make_inputs"', 'inputs = "inputs.py:make_inputs"\nbaseline = "candidate.py:add"')
        + "\n" + table)
    with pytest.raises(Problem) as e:
        load_task(d)
    assert e.value.key == key and words in e.value.problem and e.value.file.name == "task.toml"


def test_what_can_run_where():
    assert cannot_run("triton", "cpu", {}) is None and cannot_run("torch", "cpu", {}) is None
    assert "kws[pallas]" in cannot_run("pallas", "cpu", {})
    assert cannot_run("pallas", "cpu", {"jax": "0.10.2"}) is None
    assert "CUDA GPU" in cannot_run("cuda", "cpu", {"jax": "0.10.2"})
    assert cannot_run("cuda", "cuda", {}) is None
    assert "placeholders" in cannot_run("nki", "cuda", {})
    assert cannot_run("nki", "cpu", {"nki": "2.0"}) is None


def test_step_roles():
    case = {"N": 8, "dtype": "float32"}
    assert step_roles(CallStep(role="baseline", case=case)) == {"baseline"}
    assert step_roles(NumOracleStep(case=case)) == {"reference"}
    assert step_roles(PallasReadStep(cases=[case])) == {"candidate"}
    assert step_roles(CudaBuildStep(case=case)) == set()  # captures and compiles: runs without a GPU
    assert step_roles(AuthorBenchStep(case=case, baseline_role="reference")) == {"candidate", "reference"}
    sides = [TimingSide(name="b", role="baseline"), TimingSide(name="c", role="candidate")]
    assert step_roles(TimingStep(cases=[case], sides=sides)) == {"baseline", "candidate"}


def test_pallas_kernels_are_kernels_for_the_static_scans():
    sf = TaskSources(SAMPLE_QUEUE / "tasks" / "rmsnorm-triton2pallas").file("candidate.py")
    assert sf.pallas_kernel_names() == {"_rmsnorm_kernel"}  # passed through functools.partial
    assert sf.is_kernel_def(sf.top_level_defs()["_rmsnorm_kernel"])
    assert not sf.is_kernel_def(sf.top_level_defs()["rmsnorm"])
