// kws CUDA emulation: cuda_fp16.hpp stands in for the CUDA header of that name.
#pragma once
#include "kws_cuda_emu.h"
