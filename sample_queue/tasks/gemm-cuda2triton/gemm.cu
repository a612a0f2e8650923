// gemm.cu -- tiled shared-memory GEMM, C = A @ B.
//
// A: (M, K) half, row-major with leading dimension lda (>= K)
// B: (K, N) half, row-major with leading dimension ldb (>= N)
// C: (M, N) half, row-major with leading dimension ldc (>= N)
//
// Each 32x32 thread block computes one 32x32 tile of C. The K loop stages a 32x32
// tile of A and of B in shared memory (converted to float on load), then every thread
// accumulates its dot product in a float register. Out-of-range rows, columns and the
// K tail are loaded as 0, so M, N and K need not be multiples of TILE.

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdio>

#ifndef TILE
#define TILE 32
#endif

__global__ void gemm_f16_tiled(const __half* __restrict__ A,
                               const __half* __restrict__ B,
                               __half* __restrict__ C,
                               int M, int N, int K,
                               int lda, int ldb, int ldc)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;               // column inside the tile
    const int ty = threadIdx.y;               // row inside the tile
    const int row = blockIdx.y * TILE + ty;   // row of C
    const int col = blockIdx.x * TILE + tx;   // column of C

    float acc = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;               // column of A this thread stages
        const int kb = k0 + ty;               // row of B this thread stages
        As[ty][tx] = (row < M && ka < K) ? __half2float(A[(size_t)row * lda + ka]) : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? __half2float(B[(size_t)kb * ldb + col]) : 0.0f;
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {
            acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
        }
        __syncthreads();
    }

    if (row < M && col < N) {
        C[(size_t)row * ldc + col] = __float2half_rn(acc);
    }
}

// Host launcher: C = A @ B on `stream`. Returns the launch error, if any.
cudaError_t gemm_f16(const __half* A, const __half* B, __half* C,
                     int M, int N, int K, int lda, int ldb, int ldc,
                     cudaStream_t stream)
{
    if (M <= 0 || N <= 0) {
        return cudaSuccess;
    }
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_f16_tiled<<<grid, block, 0, stream>>>(A, B, C, M, N, K, lda, ldb, ldc);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "gemm_f16: launch failed: %s\n", cudaGetErrorString(err));
    }
    return err;
}
