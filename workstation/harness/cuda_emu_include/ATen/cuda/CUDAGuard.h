// kws CUDA emulation: at::cuda device guards do nothing (one emulated device).
#pragma once
#include "c10/cuda/CUDAGuard.h"
