// DistContext: this process's place in the job (rank, world, device) and its process group, if any.
#pragma once

#include "distributed/activity.h"
#include "distributed/rank_views.h"

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>  // whole classes: a DistContext's copies release them
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddp {

struct DistContext {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  int64_t group_rank = 0;  // node index
  std::string backend = "none";
  std::string rendezvous;          // "host:port (where they came from)" for a world > 1, else ""
  std::string allreduce = "none";  // shm | hierarchical | gloo | nccl | none: where all-reduces run
  std::string allreduce_note;      // with dist.allreduce = "auto" falling back to gloo: why shared memory was not used
  torch::Device device = torch::kCPU;
  c10::intrusive_ptr<c10d::Store> store;         // null for a world of one
  c10::intrusive_ptr<c10d::ProcessGroup> group;  // null for a world of one
  // After a failure: which peers on this host are gone ("rank 1 (host h, pid 7) exited"), "" when none is known
  // after waiting up to `settle` (a killed peer's sockets close before its process is gone).
  std::function<std::string(std::chrono::milliseconds)> gone_peers;
  // Ranks 0..min(world, 256)-1 as each published itself at rendezvous (host, pid); empty for a world of one.
  std::vector<RankView> views;
  // What this rank is doing (its phases, marked by the training loop), for the hang watch.
  std::shared_ptr<Activity> activity = std::make_shared<Activity>();
  c10::intrusive_ptr<c10d::Store> watch_store;  // the hang watch's own client of `store`; null for a world of one
  bool serves_store = false;  // this process serves `store` (rank 0 without a launcher's store): its exit ends it
  // A Gloo group of some of the job's ranks (`members`: job ranks in ascending order, this rank among them), over
  // `store` under `name` (one name per set of members and attempt): only the members take part in making it and in
  // its collectives, so traffic that only they need stays off the other ranks. Null for a world of one.
  std::function<c10::intrusive_ptr<c10d::Backend>(const std::vector<int64_t>& members, const std::string& name)>
      member_group;

  bool is_main() const { return rank == 0; }
  bool distributed() const { return static_cast<bool>(group); }
};

}  // namespace ddp
