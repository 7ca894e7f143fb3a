// TrainState: where a run stands (optimizer steps done, the epoch position, the best eval accuracy) as checkpoint
// entries.
#pragma once

#include "data/epoch_position.h"

#include <ATen/core/Dict.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddp {

struct TrainState {
  int64_t global_step = 0;
  EpochPosition position;
  double best_accuracy = 0;
  // This run's sharding: written beside the position, which a run of another world or batch size re-shards.
  int64_t batch_size = 1, world_size = 1;
  // Which steps ran on how many ranks: (first step, world size) pairs, flat, oldest first; a resume at another world
  // size adds one.
  std::vector<int64_t> world_sizes = {1, 1};

  // "steps 1-10: 3 ranks, 11-55: 2 ranks" up to `last_step`; "" when every step ran at one world size.
  std::string world_sizes_text(int64_t last_step) const;

  // Adds global_step, epoch, batch_in_epoch, epoch_sample_offset, epoch_order_world, batch_size, world_size,
  // best_accuracy, world_size_history, in order.
  void state_dict(c10::impl::GenericDict& out) const;
  // Range checks of those entries for a training split of train_size samples (a crafted or damaged checkpoint must
  // not index outside the epoch): throws naming the entry and its allowed range; global_step must be there.
  static void check_state_dict(const c10::impl::GenericDict& state, int64_t train_size);
  // Optimizer steps in one epoch of a run of `world_size` ranks x `batch_size`.
  using StepsPerEpoch = std::function<int64_t(int64_t world_size, int64_t batch_size)>;
  // Restores them; only global_step is required. A checkpoint without the epoch position (Python wrote it) is placed
  // by global_step, the steps per epoch of the world and batch size it was written with (its world_size and
  // batch_size, else this run's) and grad_accum_steps. Returns "" or, when the checkpoint was written by another world
  // or batch size, what the re-sharded continuation is.
  std::string load_state_dict(const c10::impl::GenericDict& state, const StepsPerEpoch& steps_per_epoch,
                              int64_t grad_accum_steps);
};

}  // namespace ddp
