// kws CUDA emulation shim: CUDA C++ compiled as host C++ (workstation/harness/cuda_emu.py).
//
// Each launch runs its blocks one at a time, in order; each block's threads run as fibers
// (ucontext) on one OS thread, so __syncthreads() is a real barrier (a thread that returned
// is out of it) and warp shuffles meet at a warp barrier. A kernel whose source uses no
// barrier, shuffle or vote runs its threads as plain calls (no fibers). __shared__ variables
// are function-scope statics (correct because blocks run one at a time; they are NOT reset
// between blocks). Atomics are plain read-modify-writes (threads never interleave between
// barriers). Math intrinsics are libm's (not the GPU's approximate instructions). Nothing
// here detects out-of-bounds accesses, data races beyond barrier order, or timing.
#pragma once
#ifndef KWS_CUDA_EMU_H
#define KWS_CUDA_EMU_H

#include <setjmp.h>
#include <ucontext.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define KWS_CUDA_EMU_VERSION 3

#define __global__
#define __device__
#define __host__
#define __managed__
#define __forceinline__ inline
// __noinline__ is defined after the source's last #include (cuda_emu.py's post-include):
// library headers spell __attribute__((__noinline__))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#ifndef __shared__
#define __shared__ static
#endif
#ifndef __constant__
#define __constant__ static
#endif

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(16) double2 { double x, y; };
struct float3 { float x, y, z; };
struct int3 { int x, y, z; };
struct __align__(8) uint2 { unsigned int x, y; };
struct __align__(16) uint4 { unsigned int x, y, z, w; };
struct __align__(4) short2 { short x, y; };
struct __align__(4) ushort2 { unsigned short x, y; };
struct __align__(8) ushort4 { unsigned short x, y, z, w; };
struct __align__(4) char4 { signed char x, y, z, w; };
struct __align__(4) uchar4 { unsigned char x, y, z, w; };
struct __align__(16) longlong2 { long long x, y; };
struct __align__(16) ulonglong2 { unsigned long long x, y; };
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline dim3 make_uint3(unsigned x, unsigned y, unsigned z) { return dim3(x, y, z); }

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

// ---- host runtime ---------------------------------------------------------------------
typedef int cudaError_t;
typedef cudaError_t CUresult;
enum : int { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
             cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719, CUDA_SUCCESS = 0 };
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaDeviceAttr { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrWarpSize = 10,
                      cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
struct cudaDeviceProp {
    char name[256] = "kws CUDA emulation (CPU)";
    int multiProcessorCount = 132, warpSize = 32, maxThreadsPerBlock = 1024, major = 9, minor = 0;
    size_t sharedMemPerBlock = 49152, sharedMemPerBlockOptin = 232448, totalGlobalMem = size_t(80) << 30;
    int maxThreadsPerMultiProcessor = 2048, regsPerBlock = 65536;
};
#define cudaStreamDefault 0
#define cudaStreamNonBlocking 1

namespace kws_emu {

enum { RUN = 0, WAIT_BLOCK = 1, WAIT_WARP = 2, DONE = 3 };

// A fiber is started once with makecontext/swapcontext; after that the scheduler and the
// fibers switch with _setjmp/_longjmp (no signal-mask system call per switch).
struct Fiber { ucontext_t ctx; jmp_buf jb; int state; bool started; };

struct Runtime {
    std::vector<Fiber> fibers;
    std::vector<char*> stacks;
    size_t stack_size = 256 * 1024;
    ucontext_t sched;
    jmp_buf sched_jb;
    int cur = 0;
    unsigned n = 0;
    bool fiber_mode = false;
    std::vector<uint64_t> slots;
    std::vector<unsigned char> dyn;
    std::function<void()> body;
    int last_error = 0;
    std::string error;  // an emulation failure (kws's, not the kernel's): raised after the launch
    unsigned long long launches = 0, threads = 0;
};

inline Runtime& rt() { static Runtime r; return r; }

inline void fail(const std::string& why) { if (rt().error.empty()) rt().error = why; }

inline void set_thread(unsigned i) {
    const dim3 b = blockDim;
    threadIdx.x = i % b.x;
    threadIdx.y = (i / b.x) % b.y;
    threadIdx.z = i / (b.x * b.y);
}

inline void trampoline() {
    Runtime& r = rt();
    r.body();
    r.fibers[r.cur].state = DONE;
    _longjmp(r.sched_jb, 1);
}

inline void wait(int kind) {
    Runtime& r = rt();
    if (!r.fiber_mode) {
        fail("a barrier, shuffle or vote ran in a kernel kws ran without fibers (none seen in its source)");
        return;
    }
    Fiber& f = r.fibers[r.cur];
    f.state = kind;
    if (!_setjmp(f.jb)) _longjmp(r.sched_jb, 1);
}

inline void run_block_fibers() {
    Runtime& r = rt();
    const unsigned n = r.n;
    if (r.fibers.size() < n) r.fibers.resize(n);
    while (r.stacks.size() < n) {
        void* p = mmap(nullptr, r.stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("kws CUDA emulation: cannot map a fiber stack");
        r.stacks.push_back(static_cast<char*>(p));
    }
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = r.fibers[i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = r.stacks[i];
        f.ctx.uc_stack.ss_size = r.stack_size;
        f.ctx.uc_link = &r.sched;
        makecontext(&f.ctx, trampoline, 0);
        f.state = RUN;
        f.started = false;
    }
    for (;;) {
        for (unsigned i = 0; i < n; ++i) {
            if (r.fibers[i].state != RUN) continue;
            r.cur = static_cast<int>(i);
            set_thread(i);
            Fiber& f = r.fibers[i];
            if (!_setjmp(r.sched_jb)) {
                if (!f.started) {
                    f.started = true;
                    swapcontext(&r.sched, &f.ctx);
                } else {
                    _longjmp(f.jb, 1);
                }
            }
        }
        unsigned done = 0, at_block = 0;
        for (unsigned i = 0; i < n; ++i) {
            done += r.fibers[i].state == DONE;
            at_block += r.fibers[i].state == WAIT_BLOCK;
        }
        if (done == n) return;
        bool released = false;
        for (unsigned w = 0; w < n; w += 32) {  // warps whose live threads all wait at a warp barrier
            const unsigned e = std::min(n, w + 32);
            bool all = true, any = false;
            for (unsigned i = w; i < e; ++i) {
                const int s = r.fibers[i].state;
                if (s == DONE) continue;
                any = true;
                all = all && s == WAIT_WARP;
            }
            if (any && all) {
                for (unsigned i = w; i < e; ++i)
                    if (r.fibers[i].state == WAIT_WARP) r.fibers[i].state = RUN;
                released = true;
            }
        }
        if (!released && at_block + done == n) {
            for (unsigned i = 0; i < n; ++i)
                if (r.fibers[i].state == WAIT_BLOCK) r.fibers[i].state = RUN;
            released = true;
        }
        if (!released) {
            fail("the threads of a block wait at different barriers (a __syncthreads or warp shuffle in "
                 "divergent code): the emulation cannot continue this block");
            return;
        }
    }
}

inline const char* error_string(int e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        default: return "unspecified launch failure";
    }
}

inline void raise_pending() {
    Runtime& r = rt();
    if (!r.error.empty()) {
        std::string e = "KwsCudaEmulationError: " + r.error;
        r.error.clear();
        throw std::runtime_error(e);
    }
}

template <class Stream, class F, class... A>
void launch(bool fibers, dim3 grid, dim3 block, size_t smem, Stream&&, F&& kernel, A&&... args) {
    Runtime& r = rt();
    raise_pending();
    const unsigned long long nb = static_cast<unsigned long long>(block.x) * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || nb == 0 || nb > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535 || smem > 232448) {
        r.last_error = cudaErrorInvalidConfiguration;  // as on a GPU: the kernel does not run
        return;
    }
    std::tuple<std::decay_t<A>...> params(std::forward<A>(args)...);
    r.body = [&]() { std::apply([&](auto&... p) { kernel(p...); }, params); };
    r.n = static_cast<unsigned>(nb);
    r.fiber_mode = fibers;
    if (r.dyn.size() < smem + 16) r.dyn.assign(smem + 16, 0);
    if (r.slots.size() < nb) r.slots.resize(nb);
    gridDim = grid;
    blockDim = block;
    ++r.launches;
    for (unsigned bz = 0; bz < grid.z && r.error.empty(); ++bz)
        for (unsigned by = 0; by < grid.y && r.error.empty(); ++by)
            for (unsigned bx = 0; bx < grid.x && r.error.empty(); ++bx) {
                blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;
                if (fibers) {
                    run_block_fibers();
                } else {
                    for (unsigned i = 0; i < r.n; ++i) {
                        r.cur = static_cast<int>(i);
                        set_thread(i);
                        r.body();
                    }
                }
                r.threads += nb;
            }
    r.body = nullptr;
    raise_pending();
}

inline void* dyn_smem() { return rt().dyn.data(); }

template <class T> struct ident { using type = T; };
template <class T> using ident_t = typename ident<T>::type;

template <class T> inline uint64_t to_bits(T v) { static_assert(sizeof(T) <= 8, "shuffle of a type over 8 bytes"); uint64_t b = 0; std::memcpy(&b, &v, sizeof(T)); return b; }
template <class T> inline T from_bits(uint64_t b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }

template <class T, class Pick>
inline T exchange(T v, Pick pick, int width) {
    Runtime& r = rt();
    const unsigned me = static_cast<unsigned>(r.cur);
    const unsigned lane = me % 32, base = me - lane;
    r.slots[me] = to_bits(v);
    wait(WAIT_WARP);
    const unsigned w = static_cast<unsigned>(width <= 0 || width > 32 ? 32 : width);
    const unsigned seg = (lane / w) * w;
    const int src = pick(static_cast<int>(lane), static_cast<int>(seg), static_cast<int>(w));
    const unsigned idx = base + static_cast<unsigned>(src);
    const T out = idx < r.n ? from_bits<T>(r.slots[idx]) : v;
    wait(WAIT_WARP);
    return out;
}

inline unsigned vote(bool p, int how) {  // 0: ballot, 1: any, 2: all
    Runtime& r = rt();
    const unsigned me = static_cast<unsigned>(r.cur);
    const unsigned base = me - me % 32;
    r.slots[me] = p ? 1 : 0;
    wait(WAIT_WARP);
    unsigned mask = 0;
    const unsigned e = std::min(r.n, base + 32);
    bool all = true;
    for (unsigned i = base; i < e; ++i) {
        if (r.fibers.size() > i && r.fibers[i].state == DONE) continue;
        if (r.slots[i]) mask |= 1u << (i - base); else all = false;
    }
    wait(WAIT_WARP);
    return how == 0 ? mask : how == 1 ? (mask != 0) : all;
}

inline long long block_count(long long v, int how) {  // __syncthreads_count/and/or
    Runtime& r = rt();
    r.slots[r.cur] = static_cast<uint64_t>(v != 0);
    wait(WAIT_BLOCK);
    long long c = 0;
    for (unsigned i = 0; i < r.n; ++i) c += static_cast<long long>(r.slots[i]);
    wait(WAIT_BLOCK);
    return how == 0 ? c : how == 1 ? (c == static_cast<long long>(r.n)) : (c != 0);
}

}  // namespace kws_emu

inline void __syncthreads() { kws_emu::wait(kws_emu::WAIT_BLOCK); }
inline int __syncthreads_count(int p) { return static_cast<int>(kws_emu::block_count(p, 0)); }
inline int __syncthreads_and(int p) { return static_cast<int>(kws_emu::block_count(p, 1)); }
inline int __syncthreads_or(int p) { return static_cast<int>(kws_emu::block_count(p, 2)); }
inline void __syncwarp(unsigned = 0xffffffffu) { kws_emu::wait(kws_emu::WAIT_WARP); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline unsigned __activemask() { return 0xffffffffu; }
inline unsigned __ballot_sync(unsigned, int p) { return kws_emu::vote(p != 0, 0); }
inline int __any_sync(unsigned, int p) { return static_cast<int>(kws_emu::vote(p != 0, 1)); }
inline int __all_sync(unsigned, int p) { return static_cast<int>(kws_emu::vote(p != 0, 2)); }

template <class T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    return kws_emu::exchange(v, [src](int, int seg, int w) { return seg + ((src % w) + w) % w; }, width);
}
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
    return kws_emu::exchange(v, [d](int lane, int seg, int w) { const int s = lane + static_cast<int>(d); return s >= seg + w ? lane : s; }, width);
}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
    return kws_emu::exchange(v, [d](int lane, int seg, int) { const int s = lane - static_cast<int>(d); return s < seg ? lane : s; }, width);
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
    return kws_emu::exchange(v, [m](int lane, int seg, int w) { const int s = lane ^ m; return (s < seg || s >= seg + w) ? lane : s; }, width);
}

// ---- atomics: plain read-modify-writes (threads switch only at barriers) ---------------
template <class T> inline T atomicAdd(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = static_cast<T>(o + v); return o; }
template <class T> inline T atomicSub(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = static_cast<T>(o - v); return o; }
template <class T> inline T atomicMax(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = o < v ? v : o; return o; }
template <class T> inline T atomicMin(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = v < o ? v : o; return o; }
template <class T> inline T atomicExch(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = v; return o; }
template <class T> inline T atomicCAS(T* a, kws_emu::ident_t<T> c, kws_emu::ident_t<T> v) { T o = *a; if (o == c) *a = v; return o; }
template <class T> inline T atomicAnd(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = o & v; return o; }
template <class T> inline T atomicOr(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = o | v; return o; }
template <class T> inline T atomicXor(T* a, kws_emu::ident_t<T> v) { T o = *a; *a = o ^ v; return o; }
inline unsigned atomicInc(unsigned* a, unsigned v) { unsigned o = *a; *a = o >= v ? 0 : o + 1; return o; }

// ---- loads, bit casts, integer intrinsics ----------------------------------------------
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float v) { int i; std::memcpy(&i, &v, 4); return i; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float v) { unsigned i; std::memcpy(&i, &v, 4); return i; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double v) { long long i; std::memcpy(&i, &v, 8); return i; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz(static_cast<unsigned>(v)) : 32; }
inline int __clzll(long long v) { return v ? __builtin_clzll(static_cast<unsigned long long>(v)) : 64; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline unsigned __brev(unsigned v) { unsigned r = 0; for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i); return r; }
inline int __mul24(int a, int b) { return a * b; }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32); }
inline long long clock64() { return 0; }

// ---- math: libm, not the GPU's approximate instructions ---------------------------------
inline int max(int a, int b) { return a < b ? b : a; }
inline int min(int a, int b) { return b < a ? b : a; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return b < a ? b : a; }
inline long long max(long long a, long long b) { return a < b ? b : a; }
inline long long min(long long a, long long b) { return b < a ? b : a; }
inline float max(float a, float b) { return std::fmax(a, b); }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline void sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }

// ---- half and bfloat16: values stored as IEEE binary16 / bfloat16, arithmetic in float
//      and rounded once to the 16-bit type (as the GPU's half instructions round once) ----
struct __half {
    _Float16 v;
    __half() = default;
    __half(float f) : v(static_cast<_Float16>(f)) {}
    __half(double d) : v(static_cast<_Float16>(d)) {}
    __half(int i) : v(static_cast<_Float16>(static_cast<float>(i))) {}
    operator float() const { return static_cast<float>(v); }
};
typedef __half half;
struct __half_raw { unsigned short x; };
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline __half __int2half_rn(int i) { return __half(i); }
inline float __half2float(__half h) { return static_cast<float>(h.v); }
inline int __half2int_rn(__half h) { return static_cast<int>(std::nearbyint(static_cast<float>(h.v))); }
inline int __half2int_rz(__half h) { return static_cast<int>(static_cast<float>(h.v)); }
inline unsigned short __half_as_ushort(__half h) { unsigned short u; std::memcpy(&u, &h, 2); return u; }
inline __half __ushort_as_half(unsigned short u) { __half h; std::memcpy(&h, &u, 2); return h; }
inline short __half_as_short(__half h) { short u; std::memcpy(&u, &h, 2); return u; }
inline __half __short_as_half(short u) { __half h; std::memcpy(&h, &u, 2); return h; }
inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half __hfma(__half a, __half b, __half c) { return __half(std::fma(float(a), float(b), float(c))); }
inline __half __hneg(__half a) { return __half(-float(a)); }
inline __half __habs(__half a) { return __half(std::fabs(float(a))); }
inline __half __hmax(__half a, __half b) { return float(a) < float(b) ? b : a; }
inline __half __hmin(__half a, __half b) { return float(b) < float(a) ? b : a; }
inline bool __hgt(__half a, __half b) { return float(a) > float(b); }
inline bool __hge(__half a, __half b) { return float(a) >= float(b); }
inline bool __hlt(__half a, __half b) { return float(a) < float(b); }
inline bool __hle(__half a, __half b) { return float(a) <= float(b); }
inline bool __heq(__half a, __half b) { return float(a) == float(b); }
inline bool __hne(__half a, __half b) { return float(a) != float(b); }
inline bool __hisnan(__half a) { return std::isnan(float(a)); }
inline bool __hisinf(__half a) { return std::isinf(float(a)); }
inline __half hexp(__half a) { return __half(std::exp(float(a))); }
inline __half hsqrt(__half a) { return __half(std::sqrt(float(a))); }
inline __half hrsqrt(__half a) { return __half(1.0f / std::sqrt(float(a))); }
inline __half operator+(__half a, __half b) { return __hadd(a, b); }
inline __half operator-(__half a, __half b) { return __hsub(a, b); }
inline __half operator*(__half a, __half b) { return __hmul(a, b); }
inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
inline __half operator-(__half a) { return __hneg(a); }
inline __half& operator+=(__half& a, __half b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, __half b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, __half b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, __half b) { return a = __hdiv(a, b); }
inline bool operator<(__half a, __half b) { return __hlt(a, b); }
inline bool operator>(__half a, __half b) { return __hgt(a, b); }
inline bool operator<=(__half a, __half b) { return __hle(a, b); }
inline bool operator>=(__half a, __half b) { return __hge(a, b); }
inline bool operator==(__half a, __half b) { return __heq(a, b); }
inline bool operator!=(__half a, __half b) { return __hne(a, b); }

struct __align__(4) __half2 { __half x, y; };
typedef __half2 half2;
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline __half2 __half2half2(__half a) { return __half2{a, a}; }
inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __half2 __hsub2(__half2 a, __half2 b) { return __half2{__hsub(a.x, b.x), __hsub(a.y, b.y)}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }

struct __nv_bfloat16 {
    unsigned short b;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) {
        unsigned u; std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) { b = static_cast<unsigned short>((u >> 16) | 0x40u); return; }
        u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
        b = static_cast<unsigned short>(u >> 16);
    }
    __nv_bfloat16(double d) : __nv_bfloat16(static_cast<float>(d)) {}
    operator float() const { unsigned u = static_cast<unsigned>(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
};
typedef __nv_bfloat16 nv_bfloat16;
struct __align__(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) + float(b)); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) - float(b)); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) * float(b)); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) { return __nv_bfloat16(std::fma(float(a), float(b), float(c))); }
inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hadd(a, b); }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = __hmul(a, b); }

// ---- host API: host memory stands in for device memory ----------------------------------
inline cudaError_t cudaGetLastError() { int e = kws_emu::rt().last_error; kws_emu::rt().last_error = 0; return e; }
inline cudaError_t cudaPeekAtLastError() { return kws_emu::rt().last_error; }
inline const char* cudaGetErrorString(cudaError_t e) { return kws_emu::error_string(e); }
inline const char* cudaGetErrorName(cudaError_t e) { return kws_emu::error_string(e); }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t n) { *p = std::calloc(n ? n : 1, 1); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
template <class T> inline cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
inline cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
template <class T> inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t s) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind = cudaMemcpyDefault) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind = cudaMemcpyDefault, cudaStream_t = nullptr) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t = nullptr) { std::memset(d, v, n); return cudaSuccess; }
template <class T> inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* s, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyHostToDevice) { std::memcpy(reinterpret_cast<char*>(&sym) + off, s, n); return cudaSuccess; }
template <class T> inline cudaError_t cudaMemcpyToSymbolAsync(T& sym, const void* s, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyHostToDevice, cudaStream_t = nullptr) { std::memcpy(reinterpret_cast<char*>(&sym) + off, s, n); return cudaSuccess; }
template <class F> inline cudaError_t cudaFuncSetAttribute(F, int, int) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { *p = cudaDeviceProp(); return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, int attr, int) {
    const cudaDeviceProp p;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *v = 49152; break;
        case cudaDevAttrWarpSize: *v = 32; break;
        case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
        default: *v = 0;
    }
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = nullptr; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.0f; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }

namespace kws_emu {
inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error: ") + error_string(e) + " (" + what + ")");
}
}  // namespace kws_emu
#define C10_CUDA_CHECK(expr) ::kws_emu::check((expr), #expr)
#define AT_CUDA_CHECK(expr) ::kws_emu::check((expr), #expr)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ::kws_emu::check(cudaGetLastError(), "kernel launch")
#define TORCH_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()

#endif  // KWS_CUDA_EMU_H
