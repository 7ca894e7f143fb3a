// Tests: EpochPosition's re-sharding and the epoch length arithmetic (batches_in, steps_in), near int64's limit too.
#include "data/epoch_position.h"

#include <gtest/gtest.h>

#include <limits>

namespace ddp {
namespace {

TEST(EpochPosition, ReshardMovesTheConsumedBatchesIntoTheGlobalOffset) {
  EpochPosition p;
  p.epoch = 2;
  p.batch_in_epoch = 5;
  p.sample_offset = 40;
  p.reshard(/*saved_world=*/4, /*saved_batch=*/8);  // 5 micro-batches x 8 x 4 ranks = 160 samples of the order
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.batch_in_epoch, 0);
  EXPECT_EQ(p.sample_offset, 200);
  p.next_epoch();
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.batch_in_epoch, 0);
  EXPECT_EQ(p.sample_offset, 0);
}

// An epoch nothing of which was trained (a checkpoint at an epoch's end) is ordered for the world that resumes it; one
// begun keeps the order of the world that began it.
TEST(EpochPosition, ReshardKeepsTheOrderWorldOfAnEpochBegunOnly) {
  EpochPosition fresh;
  fresh.reshard(/*saved_world=*/8, /*saved_batch=*/4);
  EXPECT_EQ(fresh.sample_offset, 0);
  EXPECT_EQ(fresh.order_world, 0);
  EpochPosition begun;
  begun.batch_in_epoch = 2;
  begun.reshard(8, 4);
  EXPECT_EQ(begun.sample_offset, 64);
  EXPECT_EQ(begun.order_world, 8);
  begun.batch_in_epoch = 1;
  begun.reshard(2, 4);  // a second resume: the epoch's order stays the first world's
  EXPECT_EQ(begun.sample_offset, 72);
  EXPECT_EQ(begun.order_world, 8);
}

TEST(EpochPosition, BatchesAndStepsRoundUpUnlessDropped) {
  EXPECT_EQ(batches_in(100, 32, /*drop_last=*/false), 4);
  EXPECT_EQ(batches_in(100, 32, /*drop_last=*/true), 3);
  EXPECT_EQ(batches_in(96, 32, false), 3);
  EXPECT_EQ(batches_in(0, 32, false), 0);
  EXPECT_EQ(steps_in(4, 3), 2);  // a short last step counts
  EXPECT_EQ(steps_in(6, 3), 2);
  EXPECT_EQ(steps_in(0, 3), 0);
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(batches_in(big, big - 1, false), 2);  // n + b - 1 would overflow
  EXPECT_EQ(steps_in(big, big), 1);
}

}  // namespace
}  // namespace ddp
