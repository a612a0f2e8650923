"""kws's CPU emulation of CUDA (workstation/harness/cuda_emu.py): the source rewriting (no
compiler), one small extension compiled once for the module with plain pybind11 bindings
(element-wise template kernel, shared-memory tree reduction with and without barriers, warp-
shuffle reduction, half accumulator, dynamic shared memory, a refused launch), a failed build
remembered, and the battery (load_inline with torch's bindings, in the sandbox) on
cuda-launch-floor and its clean twin and on an asm kernel, with the emulation on (one runner
for the module)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.conftest import SAMPLE_QUEUE
from workstation.harness import cuda_emu
from workstation.harness.cuda_rewrite import (
    KwsCudaEmulationError,
    mask,
    rewrite_cuda,
    rewrite_launches,
    rewrite_shared,
    unsupported,
)

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found: the CUDA emulation needs it")


# -- (a) rewriting, no compiler ------------------------------------------------------------

def test_mask_blanks_comments_and_literals_and_keeps_lines():
    src = 'a /* x<<<1,2>>>() */ b // k<<<g, b>>>(x)\n"s<<<" \'<\' c<<<g, b>>>(x);\n'
    m = mask(src)
    assert len(m) == len(src) and m.count("\n") == src.count("\n")
    assert m.count("<<<") == 1 and "c<<<g, b>>>(x)" in m


def test_launch_rewrite_handles_templates_nested_parens_and_comments():
    src = """
// not_a<<<launch>>>(here)
void go(float* x, int n, cudaStream_t s) {
    ns::kern<float, (4 > 2)><<<dim3((n + 255) / 256, std::min(n, 3)), 256, sizeof(float) * (256 + 1), s>>>(
        x, f(n, g(1, 2)), "a,b");
    other<<<1, 32>>>();
}
"""
    out, launches = rewrite_launches(src)
    assert [ln["kernel"] for ln in launches] == ["ns::kern<float, (4 > 2)>", "other"]
    first = launches[0]
    assert first["config"] == ["dim3((n + 255) / 256, std::min(n, 3))", "256", "sizeof(float) * (256 + 1)", "s"]
    assert first["args"] == ["x", "f(n, g(1, 2))", '"a,b"'] and first["line"] == 4
    assert "<<<" not in mask(out).replace("not_a<<<", "")
    assert "(kws_a...); }, x, f(n, g(1, 2)), \"a,b\")" in out
    assert "[&](auto&... kws_a) { other(kws_a...); })" in out  # no arguments: no trailing comma
    assert out.count("\n") == src.count("\n")  # line numbers kept for the compiler's messages
    with pytest.raises(KwsCudaEmulationError, match="argument list"):
        rewrite_launches("void f() { k<<<1, 2>>>; }")


def test_shared_memory_rewrite():
    src = """
extern __shared__ float glob[];
__global__ void k(float* y) {
    extern __shared__ __align__(16) unsigned char buf[];
    __shared__ float part[256];
    static __shared__ int flag;
    if (threadIdx.x < 2) { y[0] = glob[0]; }
}
"""
    out = rewrite_shared(src)
    assert "unsigned char* buf = reinterpret_cast<unsigned char*>(::kws_emu::dyn_smem());" in out
    assert "#define glob (reinterpret_cast<float*>(::kws_emu::dyn_smem()))" in out
    assert "static float part[256];" in out and "static int flag;" in out and "__shared__" not in out


def test_unsupported_constructs_are_named_before_compiling():
    assert unsupported('asm volatile("mov.u32 %0, %%laneid;" : "=r"(x));')[0].startswith("inline assembly")
    assert "tensor-core" in unsupported("nvcuda::wmma::fragment<...> a;")[0]
    assert unsupported("// asm(  in a comment\nint x;") == []
    with pytest.raises(KwsCudaEmulationError, match="cooperative groups"):
        rewrite_cuda("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n")
    text, meta = rewrite_cuda("#include <cuda_runtime.h>\n__global__ void k(){ __syncthreads(); }\n")
    assert meta["fibers"] and text.startswith("#define KWS_EMU_FIBERS 1")
    assert text.index("#define is_cuda is_cpu") > text.index("#include <cuda_runtime.h>")


# -- (b) one module, several kernels, compiled once ----------------------------------------

CUDA = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>

template <typename T>
__global__ void axpb(const T* __restrict__ x, T* __restrict__ y, T a, T b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

__global__ void row_sum(const float* x, float* out, int C, int barrier) {
    extern __shared__ float part[];
    const int t = threadIdx.x;
    float acc = 0.0f;
    for (int c = t; c < C; c += blockDim.x) acc += x[(size_t)blockIdx.x * C + c];
    part[t] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        if (barrier) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = part[0];
}

__global__ void warp_sum(const float* x, float* out, int n) {
    __shared__ float warps[32];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    if (lane == 0) warps[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x / 32) ? warps[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) atomicAdd(out, v);
    }
}

__global__ void half_acc(const __half* x, __half* out, int n) {
    __half acc = __float2half(0.0f);
    for (int i = 0; i < n; ++i) acc = __hadd(acc, x[i]);
    out[0] = acc;
}

extern "C" void launch_axpb(const float* x, float* y, int n) { axpb<float><<<(n + 127) / 128, 128>>>(x, y, 2.0f, 1.0f, n); }
extern "C" void launch_row_sum(const float* x, float* out, int R, int C, int barrier) {
    row_sum<<<R, 256, 256 * sizeof(float)>>>(x, out, C, barrier);
}
extern "C" void launch_warp_sum(const float* x, float* out, int n) {
    cudaMemset(out, 0, sizeof(float));
    warp_sum<<<(n + 255) / 256, 256>>>(x, out, n);
}
extern "C" void launch_half_acc(const void* x, void* out, int n) { half_acc<<<1, 1>>>((const __half*)x, (__half*)out, n); }
extern "C" int launch_nothing(const float* x, float* y, int n) {
    axpb<float><<<n / 128, 128>>>(x, y, 2.0f, 1.0f, n);
    return (int)cudaGetLastError();
}
"""

# plain pybind11 over raw pointers (about 4 CPU s of g++ instead of 15 for torch/extension.h;
# the load_inline path with torch's bindings runs in the battery test below)
BIND = r"""
#include <pybind11/pybind11.h>
#include <cstdint>
extern "C" void launch_axpb(const float*, float*, int);
extern "C" void launch_row_sum(const float*, float*, int, int, int);
extern "C" void launch_warp_sum(const float*, float*, int);
extern "C" void launch_half_acc(const void*, void*, int);
extern "C" int launch_nothing(const float*, float*, int);
using P = std::uintptr_t;
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("axpb", [](P x, P y, int n) { launch_axpb((const float*)x, (float*)y, n); });
    m.def("row_sum", [](P x, P o, int r, int c, int b) { launch_row_sum((const float*)x, (float*)o, r, c, b); });
    m.def("warp_sum", [](P x, P o, int n) { launch_warp_sum((const float*)x, (float*)o, n); });
    m.def("half_acc", [](P x, P o, int n) { launch_half_acc((const void*)x, (void*)o, n); });
    m.def("nothing", [](P x, P y, int n) { return launch_nothing((const float*)x, (float*)y, n); });
}
"""


class _Ext:
    """The compiled module's functions on torch tensors."""

    def __init__(self, mod):
        self.mod = mod

    def axpb(self, x):
        import torch

        y = torch.full_like(x, -7.0)
        self.mod.axpb(x.data_ptr(), y.data_ptr(), x.numel())
        return y

    def row_sum(self, x, barrier):
        out = x.new_empty(x.shape[0])
        self.mod.row_sum(x.data_ptr(), out.data_ptr(), x.shape[0], x.shape[1], barrier)
        return out

    def warp_sum(self, x):
        out = x.new_empty(1)
        self.mod.warp_sum(x.data_ptr(), out.data_ptr(), x.numel())
        return out

    def half_acc(self, x):
        out = x.new_empty(1)
        self.mod.half_acc(x.data_ptr(), out.data_ptr(), x.numel())
        return out

    def nothing(self, x):
        return self.mod.nothing(x.data_ptr(), x.new_empty(x.shape).data_ptr(), x.numel())


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ not found: the CUDA emulation needs it")
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("emu")
    mp.setenv("TRITON_CACHE_DIR", str(tmp / "triton"))
    try:
        units = [("bind.cpp", BIND, False), ("cuda.cu", rewrite_cuda(CUDA)[0], True)]
        so, rec = cuda_emu.build("kws_test_emu", units, [], tmp, [])
        yield _Ext(cuda_emu._load_so(so, rec["module"]))
    finally:
        mp.undo()


def test_emulated_kernels_compute_what_numpy_does(ext):
    import torch

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(1000).astype(np.float32))
    np.testing.assert_allclose(ext.axpb(x).numpy(), 2 * x.numpy() + 1, rtol=1e-6)  # 1000 = 7 blocks + a tail

    m = torch.from_numpy(rng.standard_normal((5, 700)).astype(np.float32))
    np.testing.assert_allclose(ext.row_sum(m, 1).numpy(), m.numpy().sum(1), rtol=1e-4, atol=1e-4)
    # without the barrier in the tree loop, thread 0 runs its whole loop before the others
    # add their halves (one legal schedule): the sums come out wrong
    assert not np.allclose(ext.row_sum(m, 0).numpy(), m.numpy().sum(1), rtol=1e-3, atol=1e-3)

    v = torch.from_numpy(rng.standard_normal(3000).astype(np.float32))
    np.testing.assert_allclose(ext.warp_sum(v).numpy()[0], v.numpy().sum(), rtol=1e-4, atol=1e-3)

    h = torch.from_numpy((np.abs(rng.standard_normal(4096)) + 1).astype(np.float16))
    acc = np.float16(0)
    for t in h.numpy():
        acc = np.float16(np.float32(acc) + np.float32(t))
    got = ext.half_acc(h).numpy()[0]
    assert got == acc and abs(float(acc) - h.numpy().astype(np.float64).sum()) > 100  # half accumulation stalls

    assert ext.nothing(torch.ones(100)) == 9  # 0 blocks: cudaErrorInvalidConfiguration, as on a GPU


# -- (c) the battery on the launch-floor pair, emulation on --------------------------------

@pytest.fixture(scope="module")
def emu_runner():
    from workstation.runner import Runner

    mp = pytest.MonkeyPatch()
    mp.setenv("KWS_CUDA_EMULATION", "1")
    try:
        with Runner() as r:
            yield r
    finally:
        mp.undo()


@needs_gxx
def test_launch_floor_fails_at_run_time_and_its_clean_twin_passes(emu_runner):
    from workstation.engine.run import run_checks
    from workstation.task.format import load_task

    if emu_runner.device.kind == "cuda":
        pytest.skip("a GPU is present: the CUDA candidate runs on it")
    assert "cuda-emu" in emu_runner.device.versions
    only = ["correctness", "unwritten-output"]
    # the two runs side by side: each compiles its extension (g++, ~20 CPU s) on its own core
    with ThreadPoolExecutor(2) as pool:
        bad, good = pool.map(lambda t: run_checks(load_task(SAMPLE_QUEUE / "tasks" / t), emu_runner, only=only),
                             ["cuda-launch-floor", "cuda-launch-floor-clean"])
    by = {r.check: r for r in bad.results}
    fails = {f.check: f for f in bad.findings if f.severity == "fail"}
    assert set(fails) == set(only), {c: (r.status, r.reason) for c, r in by.items()}
    assert "never written" in fails["unwritten-output"].summary and "[768]" in fails["unwritten-output"].summary
    assert "n=1000" in fails["correctness"].summary  # 1000 / 256 = 3 blocks: 232 elements never computed
    assert "kws_sample_cuda_launch_floor" in bad.extensions["cuda_emulation"]["builds"]

    assert {r.check: r.status for r in good.results} == {c: "pass" for c in only}
    assert not [f for f in good.findings if f.severity == "fail"]


ASM_CANDIDATE = '''
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void k(float* y) { unsigned lane; asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane)); y[lane] = 0.f; }
"""


def add(x, y):
    ext = load_inline("kws_test_asm", cpp_sources="", cuda_sources=CUDA, functions=[], no_implicit_headers=True)
    return x + y
'''


@needs_gxx
def test_a_construct_the_emulation_cannot_run_is_not_judged_naming_it(emu_runner, tmp_path):
    from tests.hostile import make_task
    from workstation.engine.run import run_checks
    from workstation.task.format import load_task

    if emu_runner.device.kind == "cuda":
        pytest.skip("a GPU is present: the CUDA candidate runs on it")
    res = run_checks(load_task(make_task(tmp_path, "cu-asm", ASM_CANDIDATE, backend="cuda")), emu_runner,
                     only=["correctness"])
    (r,) = res.results
    assert r.status == "skip" and not [f for f in res.findings if f.severity == "fail"]
    assert "inline assembly (asm)" in r.reason and "not judged" in r.reason, r.reason


@needs_gxx
def test_a_failed_build_is_remembered_for_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    units = [("bad.cu", rewrite_cuda("__global__ void k() { undeclared_thing(); }\n", "bad.cu")[0], True)]
    with pytest.raises(KwsCudaEmulationError, match="undeclared_thing") as first:
        cuda_emu.build("bad", units, [], tmp_path, [])
    assert list((tmp_path / "kws-cuda-emu").glob("*.err"))
    with pytest.raises(KwsCudaEmulationError) as again:  # from the run's cache: no second compile
        cuda_emu.build("bad", units, [], tmp_path, [])
    assert str(again.value) == str(first.value)
