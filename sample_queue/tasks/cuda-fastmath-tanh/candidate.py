"""GELU (tanh form) as a CUDA extension built with --use_fast_math."""

import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_runtime.h>

__global__ void gelu_tanh(const float* __restrict__ x, float* __restrict__ y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}

extern "C" void gelu_tanh_launch(const float* x, float* y, int n, void* stream)
{
    gelu_tanh<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, y, n);
}
"""

CPP_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

extern "C" void gelu_tanh_launch(const float* x, float* y, int n, void* stream);

torch::Tensor gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "gelu: a float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    gelu_tanh_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream().stream());
    return y;
}
"""

_ext = None


def _module():
    global _ext
    if _ext is None:
        _ext = load_inline("kws_sample_cuda_fastmath_tanh", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["gelu"],
                           extra_cuda_cflags=["-O3", "--use_fast_math"], no_implicit_headers=True)
    return _ext


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x: (n,) float32 CUDA tensor -> (n,) float32."""
    return _module().gelu(x)
