// PhaseTimes over ranks: the slots every rank fills in one sum, the straggler against the median rank, and when a
// lasting straggler is said.
#include "report/phase_times.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

RankInterval rank_with(double data, double compute, double comm, double optimizer, double rss = 0) {
  return {PhaseTimes{data, compute, comm, optimizer}, rss};
}

TEST(PhaseTimes, EachRanksSlotsSummedGiveBackEveryRank) {
  const std::vector<RankInterval> ranks = {rank_with(1, 2, 3, 4, 500), rank_with(5, 6, 7, 8, 600),
                                           rank_with(0.5, 0, 0.25, 9, 700)};
  std::vector<double> sum(ranks.size() * kRankSlots, 0.0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto slots = rank_slots(ranks[r], static_cast<int64_t>(r), static_cast<int64_t>(ranks.size()));
    ASSERT_EQ(slots.size(), sum.size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += slots[i];
  }
  const auto back = from_rank_slots(sum.data(), static_cast<int64_t>(ranks.size()));
  ASSERT_EQ(back.size(), ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(back[r].time.values(), ranks[r].time.values()) << r;
    EXPECT_EQ(back[r].rss_peak_mib, ranks[r].rss_peak_mib) << r;
  }
  const PhaseTimes mean = mean_over_ranks(ranks);
  EXPECT_DOUBLE_EQ(mean.data, 6.5 / 3);
  EXPECT_DOUBLE_EQ(mean.compute, 8.0 / 3);
  EXPECT_DOUBLE_EQ(mean.comm, 10.25 / 3);
  EXPECT_DOUBLE_EQ(mean.optimizer, 7);
}

TEST(PhaseTimes, SlowestRankIsTheOneWithMostWorkNotMostWaiting) {
  // Rank 2 computes longest; ranks 0 and 1 wait for it in the all-reduce (comm), which is not work.
  const auto s = slowest_rank({rank_with(0.01, 0.10, 0.08, 0.01), rank_with(0.01, 0.11, 0.07, 0.01),
                               rank_with(0.01, 0.18, 0.00, 0.01), rank_with(0.01, 0.10, 0.08, 0.01)});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->phase, "compute");
  // Against the lower median rank (work 0.12 of 0.12, 0.12, 0.13, 0.20): a real rank's figure.
  EXPECT_NEAR(s->excess_s, 0.08, 1e-12);
  EXPECT_NEAR(s->ratio, 0.20 / 0.12, 1e-12);
}

TEST(PhaseTimes, PhaseIsWhereTheSlowestExceedsTheMedianMost) {
  // Rank 1's compute is as long as the others'; its extra time is all in waiting for data.
  const auto s =
      slowest_rank({rank_with(0.01, 0.5, 0.2, 0.02), rank_with(0.21, 0.5, 0.0, 0.02), rank_with(0.01, 0.5, 0.2, 0.02)});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->phase, "data");
  EXPECT_FALSE(slowest_rank({rank_with(1, 1, 1, 1)}));  // a world of one has no straggler
}

TEST(StragglerWatch, SaysOneRankOnceAfterThreeSlowIntervalsInARow) {
  auto slow = [](int64_t rank, double ratio) { return std::optional<Straggler>(Straggler{rank, "compute", 0, ratio}); };
  StragglerWatch watch;
  EXPECT_FALSE(watch.observe(slow(1, 1.5)));
  EXPECT_FALSE(watch.observe(slow(1, 1.5)));
  EXPECT_TRUE(watch.observe(slow(1, 1.3)));
  EXPECT_FALSE(watch.observe(slow(1, 1.5)));  // said once per streak
  EXPECT_FALSE(watch.observe(slow(1, 1.1)));  // under 20% slower: the streak ends
  EXPECT_FALSE(watch.observe(slow(1, 1.5)));
  EXPECT_FALSE(watch.observe(slow(1, 1.5)));
  EXPECT_FALSE(watch.observe(slow(2, 1.5)));  // another rank starts its own streak
  EXPECT_FALSE(watch.observe(slow(2, 1.5)));
  EXPECT_TRUE(watch.observe(slow(2, 1.5)));
  EXPECT_FALSE(watch.observe(std::nullopt));
}

}  // namespace
}  // namespace ddp
