__global__ void scale_guarded(const float* x, float* y, long n, float a) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = x[i % n] * a;
}
__global__ void sum_sync(const float* x, float* out, int n) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = t < n ? x[t] : 0.f;
    __syncthreads();
    for (int k = 64; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0];
}
