"""Leaky ReLU as a CUDA extension, one thread per element, guarded by i < n."""

import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_runtime.h>

__global__ void leaky_relu(const float* __restrict__ x, float* __restrict__ y, int n, float slope)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : slope * v;
    }
}

extern "C" void leaky_relu_launch(const float* x, float* y, int n, float slope, void* stream)
{
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    leaky_relu<<<blocks, threads, 0, (cudaStream_t)stream>>>(x, y, n, slope);
}
"""

CPP_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

extern "C" void leaky_relu_launch(const float* x, float* y, int n, float slope, void* stream);

torch::Tensor leaky_relu(torch::Tensor x, double slope) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "leaky_relu: a float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    leaky_relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), (float)slope,
                      at::cuda::getCurrentCUDAStream().stream());
    return y;
}
"""

_ext = None


def _module():
    global _ext
    if _ext is None:
        _ext = load_inline("kws_sample_cuda_launch_floor_clean", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["leaky_relu"],
                           extra_cuda_cflags=["-O3"], no_implicit_headers=True)
    return _ext


def leaky_relu(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) float32 CUDA tensor -> (n,) float32."""
    return _module().leaky_relu(x, 0.01)
