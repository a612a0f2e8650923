// kws CUDA emulation: one stand-in stream (launches run synchronously on the host).
#pragma once
#include "kws_cuda_emu.h"
namespace c10 { namespace cuda {
struct CUDAStream {
    cudaStream_t stream() const { return nullptr; }
    operator cudaStream_t() const { return nullptr; }
    int device_index() const { return 0; }
    void synchronize() const {}
};
inline CUDAStream getCurrentCUDAStream(int = -1) { return CUDAStream(); }
inline CUDAStream getDefaultCUDAStream(int = -1) { return CUDAStream(); }
inline CUDAStream getStreamFromPool(bool = false, int = -1) { return CUDAStream(); }
inline void device_synchronize() {}
}}
namespace at { namespace cuda {
using c10::cuda::CUDAStream;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
using c10::cuda::getStreamFromPool;
using c10::cuda::device_synchronize;
}}
