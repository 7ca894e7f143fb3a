// RoundAssignment: what one round decided for this node (torchelastic's RendezvousInfo and WorkerGroup ranks).
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

struct RoundAssignment {
  int64_t round = 0;          // the job store's round number (a restart or a new membership starts the next)
  int64_t restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: failed rounds restarted before this one
  int64_t node_rank = 0;      // GROUP_RANK
  int64_t nnodes = 1;         // GROUP_WORLD_SIZE
  int64_t first_rank = 0;     // the global rank of this node's local rank 0
  int64_t world_size = 1;     // the ranks of the whole job
  std::string master_addr;    // rank 0's node
  int master_port = 0;
  std::string run_id;         // TORCHELASTIC_RUN_ID
};

}  // namespace ddp
