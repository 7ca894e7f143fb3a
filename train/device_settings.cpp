// configure_math_modes: deterministic algorithms, cuDNN choices and TF32, cuBLAS workspace, as PyTorch sets them.
#include "train/device_settings.h"

#include <ATen/Context.h>

#include <cstdlib>

namespace ddp {

void configure_math_modes(const TrainingConfig& cfg) {
  auto& context = at::globalContext();
  if (cfg.deterministic) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  context.setDeterministicAlgorithms(cfg.deterministic, /*warn_only=*/false);
  context.setDeterministicCuDNN(cfg.deterministic);
  context.setBenchmarkCuDNN(cfg.cudnn_benchmark && !cfg.deterministic);
  context.setAllowTF32CuDNN(cfg.cudnn_allow_tf32);
}

}  // namespace ddp
