// EpochSampler: the interface of a training sampler, each epoch's samples for one rank and their augmentation keys.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp {

// One rank's samples of an epoch, in order, with the key each sample's augmentation is seeded by
// (sample_seed(job.seed, epoch, key)): its index, unless the sampler repeats a sample within the epoch and its
// copies must be augmented differently.
struct EpochSamples {
  std::vector<int64_t> indices;
  std::vector<int64_t> augment_keys;  // empty: each sample's index
};

// An epoch's order is a global order every rank agrees on, of which rank r takes positions r, r + world, ...; a
// position in it (EpochPosition::sample_offset) is where an epoch resumed on another world or batch size goes on.
class EpochSampler {
 public:
  virtual ~EpochSampler() = default;
  virtual void set_epoch(int64_t epoch) = 0;
  // This rank's samples in a whole epoch.
  virtual int64_t num_samples() const = 0;
  // This rank's share of the epoch's global order from position `offset` on.
  virtual EpochSamples samples_from(int64_t offset) const = 0;
};

}  // namespace ddp
