// ddprun worker environment: torchrun's variables for one worker, and the per-worker OMP_NUM_THREADS default.
#pragma once

#include "base/cpus.h"
#include "launcher/assignment.h"
#include "launcher/options.h"

#include <cstdint>
#include <map>
#include <string>

namespace ddp {

// OMP_NUM_THREADS for each worker when the variable is unset: available CPUs / local workers, at least 1.
int64_t default_omp_threads(int64_t local_workers);

// `base` (ddprun's own environment) plus what torchrun sets for a worker: RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_NAME, ROLE_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,
// TORCHELASTIC_USE_AGENT_STORE (False: rank 0 serves the store) and TORCH_NCCL_ASYNC_ERROR_HANDLING (kept if set,
// else 1, as torchrun 2.x).
// What the round decided comes from `a`; the role, local world size and restart budget from `o`.
std::map<std::string, std::string> worker_env(std::map<std::string, std::string> base, const LaunchOptions& o,
                                              const RoundAssignment& a, int64_t local_rank);

}  // namespace ddp
