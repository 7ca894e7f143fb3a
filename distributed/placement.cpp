// choose_placement: dist.device and dist.backend resolved against the build and the GPUs this process sees.
#include "distributed/placement.h"

#include <stdexcept>

namespace ddp {

Placement choose_placement(const DistConfig& cfg, int64_t local_rank, int64_t local_world_size, bool cuda_built,
                           int64_t gpus) {
  std::string device = cfg.device;
  if (device == "auto") device = ((cuda_built && gpus > 0) || cfg.backend == "nccl") ? "cuda" : "cpu";
  if (device == "cpu" && cfg.backend == "nccl")
    throw ConfigError("dist.backend = \"nccl\" runs on CUDA devices, but dist.device = \"cpu\"; use dist.backend = "
                      "\"gloo\" or \"auto\" on CPU");
  const std::string backend = cfg.backend == "auto" ? (device == "cuda" ? "nccl" : "gloo") : cfg.backend;
  if (device == "cpu") return {torch::kCPU, backend};

  const std::string who = "dist.device = \"" + cfg.device + "\" with dist.backend = \"" + cfg.backend + "\"";
  if (!cuda_built)
    throw std::runtime_error(who + " needs a CUDA build of ddptrain (this one was built without CUDA: a CPU LibTorch "
                                   "or DDP_WITH_CUDA=OFF); use dist.device = \"cpu\"");
  if (gpus == 0)
    throw std::runtime_error(who + " needs CUDA device cuda:" + std::to_string(local_rank) + " (LOCAL_RANK " +
                             std::to_string(local_rank) + ") but no CUDA device is visible; use dist.device = \"cpu\"");
  int64_t index = local_rank;
  if (local_rank >= gpus) {
    if (backend == "nccl")
      throw std::runtime_error(who + ": LOCAL_RANK " + std::to_string(local_rank) + " of " +
                               std::to_string(local_world_size) + " local ranks has no GPU of its own (" +
                               std::to_string(gpus) + " visible; NCCL needs one GPU per rank): start at most " +
                               std::to_string(gpus) + " ranks per node, or use dist.backend = \"gloo\"");
    index = local_rank % gpus;  // Gloo: ranks share GPUs
  }
  return {torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index)), backend};
}

}  // namespace ddp
