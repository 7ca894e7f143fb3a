// DistributedSampler: the index order of torch.utils.data.distributed.DistributedSampler (PyTorch 2.11), exactly.
#pragma once

#include "data/epoch_sampler.h"

#include <cstdint>
#include <vector>

namespace ddp {

// An epoch's order of `size` samples, as torch.utils.data.DistributedSampler (and torchvision's RASampler) draws it:
// randperm from a CPU generator seeded seed + epoch, or 0..size-1 without shuffling.
std::vector<int64_t> epoch_order(int64_t size, bool shuffle, uint64_t seed, int64_t epoch);

class DistributedSampler : public EpochSampler {
 public:
  // batch_size: the micro-batch each rank trains on, which indices_from keeps whole on every rank.
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                     bool drop_last, int64_t batch_size = 1);

  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // This rank's indices for the current epoch: randperm(seed + epoch) (or 0..N-1), padded by repeating
  // from the start or truncated (drop_last) to total_size, then [rank : total_size : num_replicas].
  std::vector<int64_t> indices() const;
  // This rank's share of the global order from position `offset` on: resuming an epoch that a different world size
  // started, from the saved position in the global order. Positions offset + rank, offset + rank + replicas, ... of
  // the unpadded order, each sample of the rest once, every rank with as many batches of batch_size: where the last
  // global batch (batch_size x replicas) would leave a rank without a sample, it is padded from the order's start as
  // DistributedSampler pads an epoch; with drop_last the rest is cut to a multiple of replicas, as
  // DistributedSampler cuts an epoch. indices() at offset 0.
  std::vector<int64_t> indices_from(int64_t offset) const;
  // indices_from(offset), each sample augmented by its index.
  EpochSamples samples_from(int64_t offset) const override { return {indices_from(offset), {}}; }
  // The padded/truncated global order before striding (what every rank agrees on).
  std::vector<int64_t> global_indices() const;
  int64_t num_samples() const override { return num_samples_; }
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t batch_size_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
};

// Evaluation sharding without padding: rank r gets r, r + world, ... < size, so every sample is seen once.
std::vector<int64_t> eval_shard(int64_t size, int64_t num_replicas, int64_t rank);

}  // namespace ddp
