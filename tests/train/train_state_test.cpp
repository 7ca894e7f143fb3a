// Tests: TrainState's checkpoint entries, their range checks and the position a resume continues from.
#include "train/train_state.h"

#include <gtest/gtest.h>

#include <string>

namespace ddp {
namespace {

c10::impl::GenericDict position_entries(int64_t world, int64_t batch, int64_t order_world, int64_t offset,
                                        int64_t batch_in_epoch) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("global_step", int64_t{100});
  d.insert("epoch", int64_t{0});
  d.insert("batch_in_epoch", batch_in_epoch);
  d.insert("epoch_sample_offset", offset);
  d.insert("epoch_order_world", order_world);
  d.insert("batch_size", batch);
  d.insert("world_size", world);
  return d;
}

std::string error_of_check(const c10::impl::GenericDict& d, int64_t train_size) {
  try {
    TrainState::check_state_dict(d, train_size);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// An epoch 64 ranks began over 1025 samples is ordered over 1088 positions (ShardSampler pads its order to a multiple
// of the world it was made for); resumed from position 512 on 2 ranks x 8, each rank has 36 batches, so a checkpoint
// at its 35th batch (position 1072) is in range; more than a global batch past the padded order (1120) is not; an
// epoch's end whose last batches were partial (3 ranks x 4 over 10 samples: position 12) is.
TEST(TrainState, APositionInAnEpochPaddedForItsOrderWorldIsInRange) {
  EXPECT_EQ(error_of_check(position_entries(2, 8, 64, 512, 35), 1025), "");
  EXPECT_NE(error_of_check(position_entries(2, 8, 64, 512, 38), 1025).find("lie beyond the epoch's 1088 samples"),
            std::string::npos);
  EXPECT_EQ(error_of_check(position_entries(1, 4, 3, 12, 0), 10), "");
  EXPECT_NE(error_of_check(position_entries(2, 8, 64, 1200, 0), 1025).find("\"epoch_sample_offset\" is 1200"),
            std::string::npos);
}

// A checkpoint written at an epoch's end (nothing of the next epoch trained) names the world that wrote it as the
// order's; another world resuming it orders the epoch for itself. A begun epoch keeps the saved order.
TEST(TrainState, AnEpochNotBegunIsOrderedForTheWorldThatResumesIt) {
  const auto steps = [](int64_t, int64_t) { return int64_t{10}; };
  TrainState at_end;
  at_end.world_size = 2;
  at_end.batch_size = 8;
  EXPECT_NE(at_end.load_state_dict(position_entries(8, 8, 8, 0, 0), steps, 1), "");
  EXPECT_EQ(at_end.position.order_world, 0);
  TrainState begun;
  begun.world_size = 2;
  begun.batch_size = 8;
  begun.load_state_dict(position_entries(8, 8, 8, 0, 3), steps, 1);
  EXPECT_EQ(begun.position.sample_offset, 192);
  EXPECT_EQ(begun.position.order_world, 8);
}

}  // namespace
}  // namespace ddp
