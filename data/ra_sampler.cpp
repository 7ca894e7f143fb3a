// RASampler: torchvision's references/classification/sampler.py (repeated augmentation) on ATen's randperm.
#include "data/ra_sampler.h"

#include "data/distributed_sampler.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ddp {

RASampler::RASampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                     int64_t repetitions)
    : size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      repetitions_(repetitions) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw std::invalid_argument("RASampler: invalid rank " + std::to_string(rank) + ", should be in [0, " +
                                std::to_string(num_replicas - 1) + "]");
  if (dataset_size < 0) throw std::invalid_argument("RASampler: negative dataset size");
  if (repetitions < 1) throw std::invalid_argument("RASampler: repetitions must be at least 1");
  // Python: int(math.ceil(len(dataset) * float(repetitions) / num_replicas)), exact in integers.
  const int64_t repeated = size_ * repetitions_;
  padded_per_rank_ = repeated / num_replicas_ + (repeated % num_replicas_ != 0 ? 1 : 0);
  // Python: int(math.floor(len(dataset) // 256 * 256 / num_replicas)).
  num_selected_ = size_ / 256 * 256 / num_replicas_;
}

std::vector<int64_t> RASampler::global_indices() const {
  const std::vector<int64_t> perm = epoch_order(size_, shuffle_, seed_, epoch_);
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(total_size()));
  for (const int64_t i : perm)
    for (int64_t c = 0; c < repetitions_; ++c) indices.push_back(i);
  // Python: indices += indices[:(total_size - len(indices))], the slice no longer than the list.
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t pad = std::min(total_size() - n, n);
  for (int64_t i = 0; i < pad; ++i) indices.push_back(indices[static_cast<size_t>(i)]);
  if (static_cast<int64_t>(indices.size()) != total_size())
    throw std::logic_error("RASampler: " + std::to_string(indices.size()) + " indices after padding, expected " +
                           std::to_string(total_size()));  // Python's assert
  return indices;
}

std::vector<int64_t> RASampler::indices() const {
  const std::vector<int64_t> all = global_indices();
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total_size() && static_cast<int64_t>(mine.size()) < num_selected_; i += num_replicas_)
    mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

EpochSamples RASampler::samples_from(int64_t offset) const {
  // Positions below num_selected * world lie in the repeated list before its padding: position p is copy
  // p % repetitions of perm[p / repetitions].
  const std::vector<int64_t> perm = epoch_order(size_, shuffle_, seed_, epoch_);
  // From `offset` on, as many positions on every rank (the trained prefix's rest split evenly, a remainder of fewer
  // than world positions dropped as torchvision's num_selected_samples drops one), so that the ranks train the same
  // number of batches.
  const int64_t end = num_selected_ * num_replicas_;
  const int64_t count = std::max<int64_t>(0, end - offset) / num_replicas_;
  EpochSamples out;
  for (int64_t p = offset + rank_; p < offset + count * num_replicas_; p += num_replicas_) {
    const int64_t index = perm[static_cast<size_t>(p / repetitions_)], copy = p % repetitions_;
    out.indices.push_back(index);
    out.augment_keys.push_back(index + copy * size_);
  }
  return out;
}

}  // namespace ddp
