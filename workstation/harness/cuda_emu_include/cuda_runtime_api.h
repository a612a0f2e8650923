// kws CUDA emulation: cuda_runtime_api.h stands in for the CUDA header of that name.
#pragma once
#include "kws_cuda_emu.h"
