// configure_math_modes: training.deterministic, cudnn_benchmark and cudnn_allow_tf32 applied to ATen's global context.
#pragma once

#include "config/config.h"

#include <c10/core/Device.h>

#include <string>

namespace ddp {

// Whether cuDNN's benchmark mode is on for a run on `device`: training.cudnn_benchmark when set, and for "auto" on
// a CUDA device unless training.deterministic (torchvision's reference training script turns it on unless
// --use-deterministic-algorithms); never with training.deterministic.
bool cudnn_benchmark_on(const TrainingConfig& cfg, c10::Device device);

// What the banner says of it on CUDA: "cudnn.benchmark on (auto)", "cudnn.benchmark off", ...; "" on other devices.
std::string cudnn_benchmark_text(const TrainingConfig& cfg, c10::Device device);

// As torch.use_deterministic_algorithms(True) + torch.backends.cudnn.deterministic = True (and cudnn.benchmark =
// False) when training.deterministic; else cudnn.benchmark = cudnn_benchmark_on(cfg, device); cudnn.allow_tf32 =
// training.cudnn_allow_tf32 (PyTorch's default: on). With determinism asked, CUBLAS_WORKSPACE_CONFIG=:4096:8 is set
// unless the environment already names one (cuBLAS reads it when its first handle is made, so call this before the
// first CUDA operation).
void configure_math_modes(const TrainingConfig& cfg, c10::Device device);

}  // namespace ddp
