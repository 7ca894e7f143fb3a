// choose_placement: dist.device and dist.backend resolved against the build and the GPUs this process sees.
#include "distributed/placement.h"

#include <stdexcept>

namespace ddp {

Placement choose_placement(const DistConfig& cfg, int64_t local_rank, int64_t local_world_size, bool cuda_built,
                           int64_t gpus) {
  const bool gpu_here = cuda_built && gpus > 0;
  const bool cuda = cfg.device == DeviceChoice::Cuda ||
                    (cfg.device == DeviceChoice::Auto && (gpu_here || cfg.backend == BackendChoice::Nccl));
  const std::string backend =
      cfg.backend == BackendChoice::Auto ? (cuda ? "nccl" : "gloo") : choice_name(cfg.backend);
  // Settings that name nccl with shm or hierarchical fail at load; here dist.device = dist.backend = "auto" chose nccl
  // on this machine.
  if (backend == "nccl" && (cfg.allreduce == AllreducePath::Shm || cfg.allreduce == AllreducePath::Hierarchical))
    throw ConfigError("dist.allreduce = \"" + choice_name(cfg.allreduce) +
                      "\" is for the gloo backend, and dist.backend = \"auto\" chose nccl here (NCCL has its own "
                      "intra-host transport and topology); use dist.allreduce = \"auto\" or dist.backend = \"gloo\"");
  if (!cuda) return {torch::kCPU, backend};

  const std::string who = "dist.device = \"" + choice_name(cfg.device) + "\" with dist.backend = \"" +
                          choice_name(cfg.backend) + "\"";
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
