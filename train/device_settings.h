// configure_math_modes: training.deterministic, cudnn_benchmark and cudnn_allow_tf32 applied to ATen's global context.
#pragma once

#include "config/config.h"

namespace ddp {

// As torch.use_deterministic_algorithms(True) + torch.backends.cudnn.deterministic = True (and cudnn.benchmark =
// False) when training.deterministic; else cudnn.benchmark = training.cudnn_benchmark; cudnn.allow_tf32 =
// training.cudnn_allow_tf32 (PyTorch's default: on). With determinism asked,
// CUBLAS_WORKSPACE_CONFIG=:4096:8 is set unless the environment already names one (cuBLAS reads it when its first
// handle is made, so call this before the first CUDA operation).
void configure_math_modes(const TrainingConfig& cfg);

}  // namespace ddp
