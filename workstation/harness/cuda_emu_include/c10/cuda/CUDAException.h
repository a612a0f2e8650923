// kws CUDA emulation: C10_CUDA_CHECK / C10_CUDA_KERNEL_LAUNCH_CHECK (in kws_cuda_emu.h).
#pragma once
#include "kws_cuda_emu.h"
