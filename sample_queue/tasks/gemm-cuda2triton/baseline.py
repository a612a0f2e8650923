"""The source of this translation, runnable: gemm.cu built with load_inline (CUDA GPUs only).

gemm.cu is compiled as it is (no torch headers in the CUDA source); the C++ wrapper below
calls its host launcher gemm_f16 on the current stream. Without a GPU the build cannot link
(it needs a CUDA build of torch): kws then skips the comparison with the source.
"""

from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

cudaError_t gemm_f16(const __half* A, const __half* B, __half* C, int M, int N, int K, int lda, int ldb, int ldc,
                     cudaStream_t stream);

torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kHalf && b.scalar_type() == torch::kHalf,
                "gemm: float16 CUDA tensors expected");
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    gemm_f16((const __half*)a.data_ptr(), (const __half*)b.data_ptr(), (__half*)c.data_ptr(), a.size(0), b.size(1),
             a.size(1), a.stride(0), b.stride(0), c.stride(0), at::cuda::getCurrentCUDAStream().stream());
    return c;
}
"""

_ext = None


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: (M, K), b: (K, N) float16 CUDA tensors -> (M, N) float16 (gemm.cu's kernel)."""
    global _ext
    if _ext is None:
        src = (Path(__file__).parent / "gemm.cu").read_text()
        _ext = load_inline("kws_sample_gemm_cu_source", cpp_sources=_CPP, cuda_sources=src, functions=["gemm"],
                           extra_cuda_cflags=["-O3"], no_implicit_headers=True)
    return _ext.gemm(a.contiguous(), b.contiguous())
