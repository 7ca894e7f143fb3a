// choose_placement: the device this rank trains on (dist.device) and the backend its process group uses (dist.backend).
#pragma once

#include "config/config.h"

#include <torch/types.h>

#include <string>

namespace ddp {

struct Placement {
  torch::Device device = torch::kCPU;
  std::string backend = "gloo";  // gloo | nccl
};

// dist.device: auto = cuda:LOCAL_RANK when this build has CUDA and a GPU is visible, else cpu; cuda =
// cuda:LOCAL_RANK or a clear error; cpu = cpu. dist.backend: auto = nccl on a CUDA device, gloo on cpu; nccl needs a
// CUDA device; gloo takes either (CUDA tensors over Gloo: several ranks on one GPU, where NCCL refuses them).
// `gpus` is the number of GPUs visible to this process; more local ranks than GPUs is an error when the device is
// CUDA (with backend gloo several ranks may share one GPU, device cuda:LOCAL_RANK % gpus). Errors are one line:
// ConfigError where "auto" chose nccl for settings that need gloo (dist.allreduce = "shm"), std::runtime_error where
// the machine lacks what they need. Settings that contradict each other on any machine (cpu with nccl) fail at load.
Placement choose_placement(const DistConfig& cfg, int64_t local_rank, int64_t local_world_size, bool cuda_built,
                           int64_t gpus);

}  // namespace ddp
