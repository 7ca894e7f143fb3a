// ShardSampler: shard order, equal blocks per rank, interleaved shard pieces and the shuffle buffer.
#include "data/shard_sampler.h"

#include "config/config.h"
#include "data/distributed_sampler.h"
#include "data/sample_key.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

namespace ddp {
namespace {

// The random stream of a rank's shuffle buffer, the same on every machine.
constexpr int64_t kShuffleStream = 0x5348554646;  // "SHUFF"

// A run of consecutive samples of one shard: split indices [begin, end).
struct Piece {
  int64_t begin, end;
};

// Draws uniformly from [0, n) with a 64-bit engine, the same on every machine (std::uniform_int_distribution is not
// specified exactly): rejection from the largest multiple of n.
uint64_t draw_below(std::mt19937_64& engine, uint64_t n) {
  const uint64_t limit = ~uint64_t{0} - ~uint64_t{0} % n;
  while (true) {
    const uint64_t x = engine();
    if (x < limit) return x % n;
  }
}

}  // namespace

ShardSampler::ShardSampler(std::vector<int64_t> shard_sizes, int64_t order_world, int64_t world, int64_t rank,
                           ShardOrder order)
    : sizes_(std::move(shard_sizes)), order_world_(order_world), world_(world), rank_(rank), order_(order) {
  if (world < 1 || rank < 0 || rank >= world || order_world < 1)
    throw std::invalid_argument("ShardSampler: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                ", order world " + std::to_string(order_world));
  first_.reserve(sizes_.size());
  for (int64_t n : sizes_) {
    if (n < 0) throw std::invalid_argument("ShardSampler: a shard of negative size");
    first_.push_back(total_samples_);
    total_samples_ += n;
  }
  order_.shards_in_flight = std::max<int64_t>(1, order_.shards_in_flight);
}

int64_t ShardSampler::per_rank(int64_t world) const {
  return DistributedSampler(total_samples_, world, 0, false, 0, order_.drop_last).num_samples();
}

int64_t ShardSampler::num_samples() const { return per_rank(world_); }

std::vector<int64_t> ShardSampler::stream(int64_t q) const {
  const int64_t n = per_rank(order_world_);
  std::vector<int64_t> out;
  if (n == 0 || total_samples_ == 0) return out;
  // The block [q * n, (q + 1) * n) of the epoch's sequence (shards in order, repeated from the start past its end)
  // as pieces of shards.
  const std::vector<int64_t> shards =
      epoch_order(static_cast<int64_t>(sizes_.size()), order_.shuffle, order_.seed, epoch_);
  std::vector<Piece> pieces;
  int64_t position = 0;  // the sequence position where the current shard starts
  const int64_t begin = q * n, end = begin + n;
  for (size_t k = 0; position < end; k = (k + 1) % shards.size()) {
    const auto s = static_cast<size_t>(shards[k]);
    const int64_t lo = std::max(begin, position), hi = std::min(end, position + sizes_[s]);
    if (lo < hi) pieces.push_back({first_[s] + (lo - position), first_[s] + (hi - position)});
    position += sizes_[s];
  }
  // Pieces shards_in_flight at a time, a sample from each open one in turn.
  std::vector<int64_t> interleaved;
  interleaved.reserve(static_cast<size_t>(n));
  std::vector<Piece> open;
  size_t next_piece = 0;
  while (open.size() < static_cast<size_t>(order_.shards_in_flight) && next_piece < pieces.size())
    open.push_back(pieces[next_piece++]);
  while (!open.empty()) {
    for (size_t slot = 0; slot < open.size();) {
      interleaved.push_back(open[slot].begin++);
      if (open[slot].begin < open[slot].end) {
        ++slot;
      } else if (next_piece < pieces.size()) {
        open[slot++] = pieces[next_piece++];
      } else {
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(slot));
      }
    }
  }
  if (!order_.shuffle || order_.shuffle_buffer <= 1) return interleaved;
  // webdataset's shuffle(bufsize): each sample enters; a full buffer gives out a uniformly drawn one, the last
  // sample of the buffer taking its place; at the end the rest leave the same way.
  std::mt19937_64 engine(sample_key(order_.seed, kShuffleStream, epoch_ * order_world_ + q));
  std::vector<int64_t> buffer;
  const auto capacity = static_cast<size_t>(order_.shuffle_buffer);
  buffer.reserve(capacity);
  out.reserve(interleaved.size());
  const auto give_one = [&] {
    const size_t k = draw_below(engine, buffer.size());
    out.push_back(buffer[k]);
    buffer[k] = buffer.back();
    buffer.pop_back();
  };
  for (int64_t sample : interleaved) {
    buffer.push_back(sample);
    if (buffer.size() >= capacity) give_one();
  }
  while (!buffer.empty()) give_one();
  return out;
}

EpochSamples ShardSampler::samples_from(int64_t offset) const {
  if (offset == 0 && world_ == order_world_) return {stream(rank_), {}};
  // The global order: rank q's i-th sample at i * order_world + q.
  const int64_t n = per_rank(order_world_), total = n * order_world_;
  std::vector<int64_t> global(static_cast<size_t>(total));
  for (int64_t q = 0; q < order_world_; ++q) {
    const std::vector<int64_t> s = stream(q);
    for (int64_t i = 0; i < n; ++i) global[static_cast<size_t>(i * order_world_ + q)] = s[static_cast<size_t>(i)];
  }
  EpochSamples out;
  const int64_t rest = std::max<int64_t>(0, total - offset);
  const int64_t mine = order_.drop_last ? rest / world_ : (rest + world_ - 1) / world_;
  if (total == 0) return out;
  for (int64_t i = 0; i < mine; ++i)
    out.indices.push_back(global[static_cast<size_t>((offset + rank_ + i * world_) % total)]);
  return out;
}

std::vector<int64_t> shard_eval_block(int64_t size, int64_t world, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t i = rank * size / world; i < (rank + 1) * size / world; ++i) out.push_back(i);
  return out;
}

ShardOrder shard_order(const DataConfig& data, int64_t seed) {
  return ShardOrder{data.shuffle, static_cast<uint64_t>(seed), data.drop_last, data.shuffle_buffer,
                    data.shards_in_flight};
}

}  // namespace ddp
