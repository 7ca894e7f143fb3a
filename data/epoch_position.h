// EpochPosition: where training stands in the sample order, its re-sharding for another world, and epoch length.
#pragma once

#include <cstdint>

namespace ddp {

struct EpochPosition {
  int64_t epoch = 0;           // epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // micro-batches of `epoch` consumed per rank (a multiple of grad_accum_steps or the end)
  int64_t sample_offset = 0;   // global-order position this epoch's loader started at (a re-sharded resume)
  // The world size the epoch's global order was made for, where the order depends on it (ShardSampler); 0: the
  // current world's.
  int64_t order_world = 0;

  // A position saved by saved_world ranks x saved_batch, continued on another world or batch size: the epoch goes on
  // from the same place in the global sample order, re-sharded (its remaining samples split over the new world).
  void reshard(int64_t saved_world, int64_t saved_batch) {
    sample_offset += batch_in_epoch * saved_batch * saved_world;
    batch_in_epoch = 0;
    if (order_world == 0 && sample_offset > 0) order_world = saved_world;  // an epoch not begun: the new world's order
  }
  void next_epoch() {
    ++epoch;
    batch_in_epoch = 0;
    sample_offset = 0;
    order_world = 0;
  }
};

// Micro-batches of batch_size in samples_per_rank samples (a partial last one unless drop_last).
int64_t batches_in(int64_t samples_per_rank, int64_t batch_size, bool drop_last);
// Optimizer steps in `batches` micro-batches, grad_accum_steps a step (a short last step counts).
int64_t steps_in(int64_t batches, int64_t grad_accum_steps);

}  // namespace ddp
