// ShardSampler: an epoch of tar shards for every rank: whole shards in a seeded order, an equal share of samples for
// each rank, each rank's share read a few shards at a time through a seeded shuffle buffer.
#pragma once

#include "data/epoch_sampler.h"

#include <cstdint>
#include <vector>

namespace ddp {

struct ShardOrder {
  bool shuffle = true;           // shards in randperm(seed + epoch) order, samples through the shuffle buffer
  uint64_t seed = 0;             // job.seed
  bool drop_last = false;        // DistributedSampler's: truncate to a multiple of the world instead of padding
  int64_t shuffle_buffer = 0;    // samples the buffer holds (webdataset's shuffle(bufsize)); 0 or 1: none
  int64_t shards_in_flight = 1;  // shard pieces a rank reads at once, a sample from each in turn
};

struct DataConfig;

// The order a training run's [data] section and job.seed give (data.shuffle, data.drop_last, data.shuffle_buffer,
// data.shards_in_flight).
ShardOrder shard_order(const DataConfig& data, int64_t seed);

// The samples of shard s are the indices [first_s, first_s + sizes[s]) of the split (shards in pattern order).
//
// Each epoch every rank of the world that ordered it (`order_world`) gets one block of the epoch's sample sequence:
// the shards in randperm(seed + epoch) order (0..S-1 without shuffle), each shard's samples in its order, padded by
// repeating from the start (or truncated with drop_last) to DistributedSampler's total size, rank q taking the q-th
// of order_world equal blocks. A block holds whole shards but for the shards at its two ends, whose pieces begin or
// end at a sample (a local shard is read from that sample's offset). Rank q reads its block's shard pieces
// `shards_in_flight` at a time, one sample from each open piece in turn (the next piece opening in the slot of one
// that ends), through a shuffle buffer seeded by (seed, epoch, q): a sample enters, and once the buffer holds
// `shuffle_buffer` samples a uniformly drawn one leaves; at the end the rest leave the same way. The order depends
// on the shards' sizes, the seed, the epoch and order_world only: not on data.workers nor on what was read.
//
// The global order every rank agrees on interleaves the ranks' streams: position i * order_world + q is the i-th
// sample of rank q. An epoch resumed at position `offset` by a world of another size goes on from there, rank r
// taking positions offset + r, offset + r + world, ... (past the end: from the start again, as padding); every rank
// gets ceil(rest / world) samples (floor with drop_last).
class ShardSampler : public EpochSampler {
 public:
  ShardSampler(std::vector<int64_t> shard_sizes, int64_t order_world, int64_t world, int64_t rank, ShardOrder order);

  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  // A whole epoch's samples per rank: DistributedSampler's num_samples for this world.
  int64_t num_samples() const override;
  EpochSamples samples_from(int64_t offset) const override;
  // Rank q's samples in the epoch's order for order_world ranks.
  std::vector<int64_t> stream(int64_t q) const;

 private:
  int64_t per_rank(int64_t world) const;

  std::vector<int64_t> sizes_, first_;
  int64_t total_samples_ = 0;
  int64_t order_world_, world_, rank_;
  ShardOrder order_;
  int64_t epoch_ = 0;
};

// Evaluation of a split of shards without padding: rank r gets the contiguous block [r * size / world,
// (r + 1) * size / world) of the split, so that a rank reads runs of whole shards front to back and every sample is
// seen once.
std::vector<int64_t> shard_eval_block(int64_t size, int64_t world, int64_t rank);

}  // namespace ddp
