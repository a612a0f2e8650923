// kws CUDA emulation: ATen/cuda/CUDAContext.h for a kernel compiled as host code.
#pragma once
#include "kws_cuda_emu.h"
#include "c10/cuda/CUDAStream.h"
namespace at { namespace cuda {
inline cudaDeviceProp* getCurrentDeviceProperties() { static cudaDeviceProp p; return &p; }
inline cudaDeviceProp* getDeviceProperties(int) { return getCurrentDeviceProperties(); }
inline int warp_size() { return 32; }
}}
