// ddprun worker environment: torchrun's per-worker variables and the OMP_NUM_THREADS default.
#include "launcher/env.h"

#include <algorithm>

namespace ddp {

int64_t default_omp_threads(int64_t local_workers) {
  return std::max<int64_t>(1, available_cpus() / std::max<int64_t>(1, local_workers));
}

std::map<std::string, std::string> worker_env(std::map<std::string, std::string> env, const LaunchOptions& o,
                                              const RoundAssignment& a, int64_t local_rank) {
  const int64_t world_size = a.world_size;
  const std::string rank = std::to_string(a.first_rank + local_rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["RANK"] = rank;
  env["GROUP_RANK"] = std::to_string(a.node_rank);
  env["ROLE_RANK"] = rank;  // one role: the role rank is the global rank
  env["ROLE_NAME"] = o.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["WORLD_SIZE"] = std::to_string(world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(a.nnodes);
  env["ROLE_WORLD_SIZE"] = std::to_string(world_size);
  env["MASTER_ADDR"] = a.master_addr;
  env["MASTER_PORT"] = std::to_string(a.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(a.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(o.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = a.run_id;
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  if (env.find("TORCH_NCCL_ASYNC_ERROR_HANDLING") == env.end()) env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  return env;
}

}  // namespace ddp
