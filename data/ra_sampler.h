// RASampler: the repeated-augmentation sampler of torchvision's references/classification/sampler.py, exactly.
#pragma once

#include "data/epoch_sampler.h"

#include <cstdint>
#include <vector>

namespace ddp {

// Each sample of randperm(seed + epoch) (or 0..N-1 without shuffle) repeated `repetitions` times in a row, padded
// from the start to total_size = ceil(N * repetitions / world) * world, rank r taking [r : total_size : world] and
// training the first floor(N // 256 * 256 / world) of them (torchvision's num_selected_samples, its __len__).
//
// The global order: the repeated list, whose first num_selected_samples * world positions an epoch trains (never
// the padding: that prefix is at most N // 256 * 256 <= N samples). Only its length depends on the world size, so
// an epoch resumed on another world goes on from the same position, to the new world's end, every rank taking as
// many positions (a remainder of fewer than world positions dropped).
//
// The copies of a sample are augmented differently: copy c (0-based, position p has c = p % repetitions) of sample
// i has the augmentation key i + c * N, so the first copy keeps the key DistributedSampler gives the sample.
class RASampler : public EpochSampler {
 public:
  RASampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed, int64_t repetitions);

  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  // num_selected_samples: what torchvision's RASampler yields per rank and epoch (0 when N // 256 * 256 < world,
  // as below 256 samples).
  int64_t num_samples() const override { return num_selected_; }
  // torchvision's num_samples: this rank's share of the padded list, of which the first num_samples() are trained.
  int64_t padded_per_rank() const { return padded_per_rank_; }
  int64_t total_size() const { return padded_per_rank_ * num_replicas_; }
  // The repeated and padded list before striding (total_size() entries).
  std::vector<int64_t> global_indices() const;
  // This rank's samples of the epoch: what iter(RASampler) yields.
  std::vector<int64_t> indices() const;
  // This rank's share of the trained global order from position `offset` on, with each copy's augmentation key.
  EpochSamples samples_from(int64_t offset) const override;

 private:
  int64_t size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  int64_t repetitions_;
  int64_t epoch_ = 0;
  int64_t padded_per_rank_, num_selected_;
};

}  // namespace ddp
