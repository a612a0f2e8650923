#include <cuda_runtime.h>
__global__ void rowsoftmax(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
    __shared__ float red[256];
    int row = blockIdx.x, t = threadIdx.x;
    float m = -1e30f;
    for (int c = t; c < C; c += blockDim.x) m = fmaxf(m, x[(size_t)row * C + c]);
    red[t] = m;
    for (int s = 128; s > 0; s >>= 1) {
        if (t < s) red[t] = fmaxf(red[t], red[t + s]);
    }
    m = red[0];
    float sum = 0.f;
    for (int c = t; c < C; c += blockDim.x) sum += __expf(x[(size_t)row * C + c] - m);
    for (int c = t; c < C; c += blockDim.x) y[(size_t)row * C + c] = tanhf(sum);
}
__global__ void scale(const float* x, float* y, long n, float a) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    y[i] = x[i % n] * a;
}
extern "C" void launch(const float* x, float* y, int n, void* s) {
    scale<<<n / 256, 256, 0, (cudaStream_t)s>>>(x, y, n, 2.0f);
}
