// Shared-memory all-reduce for ranks on one host: a c10d::Backend that runs dense CPU all-reduces through a segment
// every rank maps, and forwards every other collective to the backend it wraps (Gloo).
//
// Gloo moves all-reduce data through loopback TCP: the kernel copies every byte twice per hop, on cores the
// training threads need (ResNet-18: ~30 ms of CPU per rank and step for 45 MB of gradients). Through shared
// memory a rank copies in the shares the other ranks sum, sums its own share (its own values read in place), and
// copies the others' sums out: ~2.5 passes over memory, no system calls but a futex wake per phase. The Reducer,
// the fp16 compression hook, GradScaler's found_inf and the metric reductions all call allreduce() unchanged.
//
// Results: rank 0's values + rank 1's + ... in rank order, each share summed once and copied to every rank, so
// every rank holds the same bits. For two ranks this equals Gloo's result bit for bit (a + b == b + a).
#pragma once

#include "distributed/c10d_fwd.h"

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace ddp {

struct ShmAllreduceOptions {
  std::string dir = "/dev/shm";    // where rank 0 makes the segment's unnamed file (tmpfs: memory)
  std::string proc_dir = "/proc";  // where peers find rank 0's fd (tests give ranks different ones: other hosts)
  size_t slot_bytes = 1u << 20;    // all-reduces go through in pieces of this size per rank (two pieces in flight)
  std::chrono::milliseconds timeout{300000};  // dist.timeout_s: the longest wait for a peer in one phase
  // Rank 0's process serves the store and a refusal ends the job: rank 0 returns a refusal only once every rank has
  // read it (within a few seconds), so that each rank ends with the reason instead of finding the store gone.
  bool wait_for_readers_of_refusal = false;
};

struct ShmAllreduceSetup {
  c10::intrusive_ptr<c10d::Backend> backend;  // the shared-memory backend, or the wrapped backend unchanged
  bool active = false;
  std::string reason;  // when !active: why not, naming the rank ("rank 1: cannot open /dev/shm/...: ...")
};

// Collective over `store` (every rank calls it): rank 0 creates the segment, every rank maps it and checks its
// token, and all-reduces go through it only when every rank could (else every rank keeps `inner`). The file never
// has a name in `dir` (peers open it through /proc/<pid>/fd of rank 0, which closes it once every rank answered), so
// a kill at any point leaves nothing behind: its memory goes with the last process that maps it.
ShmAllreduceSetup wrap_with_shm_allreduce(const c10::intrusive_ptr<c10d::Backend>& inner,
                                          const c10::intrusive_ptr<c10d::Store>& store,
                                          const ShmAllreduceOptions& options);

// Where a rank sits for the hierarchical all-reduce: its node, and its place among the node's ranks, which are
// numbered node by node (torchrun's RANK = node * LOCAL_WORLD_SIZE + LOCAL_RANK).
struct NodePlace {
  int node = 0;
  int nodes = 1;
  int local_rank = 0;
  int local_world = 1;
};

// Makes the group of one rank per node (every node's first rank calls it, as rank `node` of `nodes`, over `store`).
using AcrossNodes =
    std::function<c10::intrusive_ptr<c10d::Backend>(const c10::intrusive_ptr<c10d::Store>& store, int node, int nodes)>;

// Horovod's hierarchical all-reduce (Sergeev and Del Balso, 2018), collective over `store`: each node's ranks share
// a segment as above, and each node's first rank joins `across`'s group. A CPU all-reduce is reduced within each
// node through shared memory, all-reduced between the nodes' first ranks (one rank per node on the network instead
// of every rank), and copied back through shared memory, so every rank of the job holds the first ranks' bits.
// Results: within a node, its ranks in order (as above); between nodes, the group's all-reduce of the node sums.
// Active only when every node's ranks could map their node's segment (and there are several nodes of more than one
// rank); else every rank keeps `inner`, with the first failing rank's reason.
// How an all-reduce's error starts when the all-reduce between nodes failed (another node's first rank is gone or
// unreachable); what Gloo said follows.
inline constexpr const char* kBetweenNodesFailed =
    "hierarchical all-reduce: the all-reduce between nodes failed (another node's first rank is gone or "
    "unreachable): ";

ShmAllreduceSetup wrap_with_hierarchical_allreduce(const c10::intrusive_ptr<c10d::Backend>& inner,
                                                   const c10::intrusive_ptr<c10d::Store>& store,
                                                   const ShmAllreduceOptions& options, const NodePlace& place,
                                                   const AcrossNodes& across);

}  // namespace ddp
