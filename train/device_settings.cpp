// configure_math_modes: deterministic algorithms, cuDNN choices and TF32, cuBLAS workspace, as PyTorch sets them.
#include "train/device_settings.h"

#include <ATen/Context.h>

#include <cstdlib>

namespace ddp {

bool cudnn_benchmark_on(const TrainingConfig& cfg, c10::Device device) {
  if (cfg.deterministic) return false;
  return cfg.cudnn_benchmark.automatic ? device.is_cuda() : cfg.cudnn_benchmark.value;
}

std::string cudnn_benchmark_text(const TrainingConfig& cfg, c10::Device device) {
  if (!device.is_cuda()) return "";
  return std::string("cudnn.benchmark ") + (cudnn_benchmark_on(cfg, device) ? "on" : "off") +
         (cfg.cudnn_benchmark.automatic ? (cfg.deterministic ? " (auto: deterministic)" : " (auto)") : "");
}

void configure_math_modes(const TrainingConfig& cfg, c10::Device device) {
  auto& context = at::globalContext();
  if (cfg.deterministic) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  context.setDeterministicAlgorithms(cfg.deterministic, /*warn_only=*/false);
  context.setDeterministicCuDNN(cfg.deterministic);
  context.setBenchmarkCuDNN(cudnn_benchmark_on(cfg, device));
  context.setAllowTF32CuDNN(cfg.cudnn_allow_tf32);
}

}  // namespace ddp
