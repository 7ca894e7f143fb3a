// Rendezvous from the environment (torchrun, Slurm, Open MPI variables) and process-group creation.
#pragma once

#include "config/config.h"
#include "distributed/context.h"

#include <map>
#include <string>

namespace ddp {

struct RendezvousInfo {
  bool present = false;         // false: no variables set, a world of one
  std::string source = "none";  // torchrun | slurm | openmpi | none
  int64_t rank = 0, world_size = 1, local_rank = 0, local_world_size = 1, group_rank = 0;
  int64_t group_world_size = 0;  // nodes (torchrun's GROUP_WORLD_SIZE); 0: not told
  std::string master_addr;
  int master_port = 0;
  // Where master_addr:master_port came from, for the banner: "MASTER_ADDR" when both variables were set, else e.g.
  // "first host of SLURM_STEP_NODELIST, port from SLURM_JOB_ID"; "" for a world of one.
  std::string master_origin;
  bool agent_store = false;   // TORCHELASTIC_USE_AGENT_STORE=True: every rank is a store client
  int64_t restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: with an agent store, keys live under attempt_<n>
  // DDPTRAIN_JOB_SECRET (ddprun makes one per job): the store's keys and values are sealed with it (SealedStore).
  // Empty: plain keys, as torchrun's workers use them (the store's port must then be reachable only by the job).
  std::string job_secret;
  std::string config_digest;  // set by the caller: published at rendezvous, compared across ranks
};

// Reads the job's place from env (a map, so tests can pass their own). Malformed values throw
// std::runtime_error naming the variable. Under Slurm, an unset MASTER_ADDR is the node list's first host and an
// unset MASTER_PORT comes from SLURM_JOB_ID (distributed/slurm_master.h); set ones always win.
RendezvousInfo rendezvous_from_env(const std::map<std::string, std::string>& env);

// Joins the job: TCPStore (rank 0 serves unless agent_store), a join barrier bounded by dist.timeout_s,
// and the process group for dist.backend (gloo, or nccl on CUDA builds). A world of one gets no store
// and no group.
DistContext init_distributed(const RendezvousInfo& info, const DistConfig& cfg);

// Whether this build can run NCCL on CUDA.
bool cuda_build();

}  // namespace ddp
