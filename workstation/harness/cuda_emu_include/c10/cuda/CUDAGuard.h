// kws CUDA emulation: device guards do nothing (one emulated device).
#pragma once
#include "kws_cuda_emu.h"
#include "c10/cuda/CUDAStream.h"
namespace c10 { namespace cuda {
struct CUDAGuard { template <class T> explicit CUDAGuard(const T&) {} void set_index(int) {} };
struct OptionalCUDAGuard { OptionalCUDAGuard() {} template <class T> explicit OptionalCUDAGuard(const T&) {} template <class T> void set_device(const T&) {} void reset() {} };
struct CUDAStreamGuard { template <class T> explicit CUDAStreamGuard(const T&) {} };
}}
namespace at { namespace cuda {
using c10::cuda::CUDAGuard;
using c10::cuda::OptionalCUDAGuard;
using c10::cuda::CUDAStreamGuard;
}}
