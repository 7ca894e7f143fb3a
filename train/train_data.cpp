// Trainer's input: how many loader threads data.workers means for this rank.
#include "train/trainer.h"

#include "base/cpus.h"
#include "data/loader_options.h"

#include <ATen/Parallel.h>

namespace ddp {
namespace {

// The threads a rank's step runs on: the intra-op threads on the CPU; on an accelerator the one that launches it.
int64_t training_threads(const c10::Device& device) { return device.is_cpu() ? at::get_num_threads() : 1; }

}  // namespace

int64_t Trainer::loader_workers() const {
  return resolve_workers(cfg_.data.workers, available_cpus(), ctx_.local_world_size, training_threads(ctx_.device));
}

}  // namespace ddp
