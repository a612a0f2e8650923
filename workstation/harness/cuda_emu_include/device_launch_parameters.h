// kws CUDA emulation: device_launch_parameters.h stands in for the CUDA header of that name.
#pragma once
#include "kws_cuda_emu.h"
