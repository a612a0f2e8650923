// fp32 -> fp16 cast-copy with 16-byte vector stores (8 halves per thread).
// y[i] = __float2half_rn(x[i]) for 0 <= i < n. x and y must be 16-byte aligned.
#include <cuda_fp16.h>
#include <cstdint>

__global__ void cast_copy_f32_f16(const float* __restrict__ x, __half* __restrict__ y,
                                  int64_t n) {
    const int64_t n_vec = n / 8;  // whole groups of 8 elements
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n_vec;
         v += stride) {
        const float4 a = reinterpret_cast<const float4*>(x)[2 * v];
        const float4 b = reinterpret_cast<const float4*>(x)[2 * v + 1];
        __half2 h[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w),
                        __floats2half2_rn(b.x, b.y), __floats2half2_rn(b.z, b.w)};
        reinterpret_cast<uint4*>(y)[v] = *reinterpret_cast<const uint4*>(h);
    }
    // Tail: the last n % 8 elements, one per thread of block 0, scalar stores.
    const int64_t tail = n - n_vec * 8;
    if (blockIdx.x == 0 && threadIdx.x < tail) {
        const int64_t i = n_vec * 8 + threadIdx.x;
        y[i] = __float2half_rn(x[i]);
    }
}

void cast_copy_f32_f16_launch(const float* x, __half* y, int64_t n, cudaStream_t stream) {
    const int threads = 256;
    const int64_t n_vec = n / 8;
    int blocks = static_cast<int>((n_vec + threads - 1) / threads);
    blocks = blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks);
    cast_copy_f32_f16<<<blocks, threads, 0, stream>>>(x, y, n);
}
