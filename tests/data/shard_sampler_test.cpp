// Tests: ShardSampler gives every rank as many samples as every other (shards of very unequal sizes, 2 and 3 ranks),
// every sample once, whole shards per rank, a bounded shuffle, and an epoch resumed on another world goes on exactly.
#include "data/distributed_sampler.h"
#include "data/shard_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace ddp {
namespace {

const std::vector<int64_t> kUnequal = {1, 57, 3, 0, 18, 2, 41, 9, 1, 30};  // 162 samples

// The shard holding split index i.
int64_t shard_of(const std::vector<int64_t>& sizes, int64_t i) {
  for (size_t s = 0; s < sizes.size(); ++s) {
    if (i < sizes[s]) return static_cast<int64_t>(s);
    i -= sizes[s];
  }
  return -1;
}

TEST(ShardSampler, EveryRankGetsAsManySamplesAndEverySampleIsSeenOnce) {
  const int64_t total = std::accumulate(kUnequal.begin(), kUnequal.end(), int64_t{0});
  for (int64_t world : {1, 2, 3, 7}) {
    for (bool drop_last : {false, true}) {
      for (int64_t epoch : {0, 1}) {
        std::map<int64_t, int64_t> seen;
        const int64_t expected = DistributedSampler(total, world, 0, true, 0, drop_last).num_samples();
        for (int64_t rank = 0; rank < world; ++rank) {
          ShardSampler sampler(kUnequal, world, world, rank, {true, 17, drop_last, 16, 3});
          sampler.set_epoch(epoch);
          const std::vector<int64_t> mine = sampler.samples_from(0).indices;
          // Equal work: the same count on every rank, DistributedSampler's, so no rank waits for a missing batch.
          ASSERT_EQ(static_cast<int64_t>(mine.size()), expected) << world << " ranks, rank " << rank;
          EXPECT_EQ(sampler.num_samples(), expected);
          for (int64_t i : mine) ++seen[i];
        }
        // Every sample once; padding repeats (world - 1 at most) or drop_last leaves out (world - 1 at most).
        int64_t repeated = 0, distinct = static_cast<int64_t>(seen.size());
        for (const auto& [i, n] : seen) {
          ASSERT_GE(i, 0);
          ASSERT_LT(i, total);
          repeated += n - 1;
        }
        if (drop_last) {
          EXPECT_EQ(repeated, 0);
          EXPECT_EQ(distinct, expected * world);
          EXPECT_GT(distinct, total - world);
        } else {
          EXPECT_EQ(distinct, total) << world;
          EXPECT_EQ(repeated, expected * world - total);
          EXPECT_LT(repeated, world);
        }
      }
    }
  }
}

TEST(ShardSampler, ARankReadsWholeShardsButAtItsBlocksEnds) {
  // 12 shards of 10 over 3 ranks: 4 whole shards each; 10 of 10 over 4 ranks: 25 samples, at most 4 shards each,
  // 2 of them whole.
  for (auto [shards, world] : {std::pair{12, 3}, std::pair{10, 4}}) {
    const std::vector<int64_t> sizes(static_cast<size_t>(shards), 10);
    std::set<int64_t> all;
    for (int64_t rank = 0; rank < world; ++rank) {
      ShardSampler sampler(sizes, world, world, rank, {true, 3, false, 8, 2});
      sampler.set_epoch(5);
      std::map<int64_t, int64_t> per_shard;
      for (int64_t i : sampler.samples_from(0).indices) ++per_shard[shard_of(sizes, i)];
      int64_t whole = 0;
      for (const auto& [s, n] : per_shard) whole += n == 10;
      if (shards % world == 0) {
        EXPECT_EQ(per_shard.size(), static_cast<size_t>(shards / world));
        EXPECT_EQ(whole, shards / world);
      } else {
        EXPECT_LE(per_shard.size(), 4u);
        EXPECT_GE(whole, static_cast<int64_t>(per_shard.size()) - 2);
      }
      for (const auto& [s, n] : per_shard) EXPECT_TRUE(all.insert(s).second || shards % world != 0) << s;
    }
  }
}

TEST(ShardSampler, WithoutShuffleShardsAreReadInOrderAPieceFromEachOpenShardInTurn) {
  // Shards {0,1,2} {3,4} {5} {6,7,8,9}, two open at a time, one rank: 0 3 1 4 2 5 6 7 8 9 (shard 1 ends; shard 2
  // opens in its slot, ends, shard 3 opens there).
  ShardSampler sampler({3, 2, 1, 4}, 1, 1, 0, {false, 0, false, 100, 2});
  EXPECT_EQ(sampler.samples_from(0).indices, (std::vector<int64_t>{0, 3, 1, 4, 2, 5, 6, 7, 8, 9}));
  // Two ranks: rank 1 gets the second half, shard 2's piece opening its block.
  ShardSampler second({3, 2, 1, 4}, 2, 2, 1, {false, 0, false, 100, 2});
  EXPECT_EQ(second.samples_from(0).indices, (std::vector<int64_t>{5, 6, 7, 8, 9}));
}

TEST(ShardSampler, TheShuffleBufferMovesASampleNoEarlierThanItEntersAndTheOrderIsSeeded) {
  const std::vector<int64_t> sizes(8, 50);
  const int64_t buffer = 20;
  ShardSampler plain(sizes, 1, 1, 0, {true, 11, false, 0, 4});
  ShardSampler shuffled(sizes, 1, 1, 0, {true, 11, false, buffer, 4});
  const std::vector<int64_t> entered = plain.samples_from(0).indices, left = shuffled.samples_from(0).indices;
  ASSERT_EQ(entered.size(), left.size());
  EXPECT_NE(entered, left);
  std::map<int64_t, int64_t> entry;
  for (size_t p = 0; p < entered.size(); ++p) entry[entered[p]] = static_cast<int64_t>(p);
  int64_t moved = 0;
  for (size_t p = 0; p < left.size(); ++p) {
    // A sample leaves once the buffer is full after it entered: never before, so it is read at most `buffer`
    // samples before it is needed.
    EXPECT_GE(static_cast<int64_t>(p), entry.at(left[p]) - (buffer - 1)) << left[p];
    moved += static_cast<int64_t>(p) != entry.at(left[p]);
  }
  EXPECT_GT(moved, static_cast<int64_t>(left.size()) / 2);
  // The same (seed, epoch) gives the same order, another epoch or seed another.
  ShardSampler again(sizes, 1, 1, 0, {true, 11, false, buffer, 4}),
      other_seed(sizes, 1, 1, 0, {true, 12, false, buffer, 4});
  EXPECT_EQ(again.samples_from(0).indices, left);
  EXPECT_NE(other_seed.samples_from(0).indices, left);
  again.set_epoch(1);
  EXPECT_NE(again.samples_from(0).indices, left);
}

TEST(ShardSampler, AnEpochResumedOnAnotherWorldGoesOnFromItsPositionEverySampleOnce) {
  const int64_t total = std::accumulate(kUnequal.begin(), kUnequal.end(), int64_t{0});
  for (auto [from, to] : {std::pair{2, 3}, std::pair{3, 2}, std::pair{2, 5}}) {
    const ShardOrder order{true, 23, false, 10, 2};
    // `from` ranks train 4 micro-batches of 6, then the epoch goes on with `to` ranks.
    const int64_t offset = 4 * 6 * from;
    std::map<int64_t, int64_t> seen;
    for (int64_t rank = 0; rank < from; ++rank) {
      ShardSampler sampler(kUnequal, from, from, rank, order);
      sampler.set_epoch(2);
      const std::vector<int64_t> mine = sampler.samples_from(0).indices;
      for (size_t i = 0; i < 24; ++i) ++seen[mine[i]];
    }
    int64_t after = -1;
    for (int64_t rank = 0; rank < to; ++rank) {
      ShardSampler sampler(kUnequal, from, to, rank, order);
      sampler.set_epoch(2);
      const std::vector<int64_t> rest = sampler.samples_from(offset).indices;
      if (after < 0) after = static_cast<int64_t>(rest.size());
      EXPECT_EQ(static_cast<int64_t>(rest.size()), after) << "rank " << rank;  // equal work after the resume too
      for (int64_t i : rest) ++seen[i];
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), total) << from << " -> " << to;
    int64_t repeated = 0;
    for (const auto& [i, n] : seen) repeated += n - 1;
    // Padding only: the old world's (from - 1 at most) and the new one's (to - 1 at most).
    EXPECT_LT(repeated, from + to - 1) << from << " -> " << to;
  }
}

}  // namespace
}  // namespace ddp

namespace ddp {
namespace {

TEST(ShardSampler, EvaluationGivesEachRankAContiguousBlockAndEverySampleOnce) {
  for (int64_t size : {0, 1, 5, 36, 37}) {
    for (int64_t world : {1, 2, 3, 7}) {
      std::vector<int64_t> all;
      for (int64_t r = 0; r < world; ++r) {
        const std::vector<int64_t> block = shard_eval_block(size, world, r);
        for (size_t i = 1; i < block.size(); ++i) EXPECT_EQ(block[i], block[i - 1] + 1);
        EXPECT_LE(static_cast<int64_t>(block.size()), size / world + 1);
        EXPECT_GE(static_cast<int64_t>(block.size()), size / world);
        all.insert(all.end(), block.begin(), block.end());
      }
      std::vector<int64_t> expected(static_cast<size_t>(size));
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(all, expected) << size << " samples, " << world << " ranks";
    }
  }
}

}  // namespace
}  // namespace ddp
