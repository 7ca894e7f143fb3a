// Tests: plan_offsets never overlaps allocations live at the same time, and reaches the peak on training-like steps.
#include "memory/step_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ddp {
namespace {

bool live_together(const Lifetime& a, const Lifetime& b) {
  return a.allocated_at < b.freed_at && b.allocated_at < a.freed_at;
}

// Random allocations over a sequence of 2n events, each allocation freed after it is made.
std::vector<Lifetime> random_lifetimes(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<Lifetime> out;
  for (int i = 0; i < n; ++i) {
    const int64_t a = std::uniform_int_distribution<int64_t>(0, 2 * n)(gen);
    const int64_t f = a + 1 + std::uniform_int_distribution<int64_t>(0, n / 2)(gen);
    out.push_back({std::uniform_int_distribution<int64_t>(1, 300000)(gen), a, f});
  }
  return out;
}

TEST(StepPlan, AllocationsLiveTogetherNeverShareBytes) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto allocs = random_lifetimes(120, seed);
    const StepPlan plan = plan_offsets(allocs, 64);
    ASSERT_EQ(plan.offsets.size(), allocs.size());
    for (size_t i = 0; i < allocs.size(); ++i) {
      EXPECT_EQ(plan.offsets[i] % 64, 0);
      EXPECT_LE(plan.offsets[i] + allocs[i].bytes, plan.total_bytes);
      for (size_t j = 0; j < allocs.size(); ++j) {
        if (i == j) continue;
        const bool overlap =
            plan.offsets[i] < plan.offsets[j] + allocs[j].bytes && plan.offsets[j] < plan.offsets[i] + allocs[i].bytes;
        if (live_together(allocs[i], allocs[j])) {
          EXPECT_FALSE(overlap) << "seed " << seed << ": " << i << " and " << j;
        }
        const auto& shares = plan.shares_memory_with[i];
        EXPECT_EQ(overlap, std::find(shares.begin(), shares.end(), static_cast<int32_t>(j)) != shares.end())
            << "seed " << seed << ": " << i << " and " << j;
      }
    }
    EXPECT_GE(plan.total_bytes, peak_live_bytes(allocs));
  }
}

// A forward pass that keeps its activations and a backward pass that frees them in reverse while making
// gradients of the same sizes: the plan needs at most 2% more than the peak of live bytes (glibc's heap, for
// ResNet-18's step, ~40% more).
TEST(StepPlan, ForwardBackwardStepFitsNearlyInItsPeak) {
  const std::vector<int64_t> sizes = {3 << 20,   3 << 20,   768 << 10, 768 << 10, 768 << 10,
                                      512 << 10, 512 << 10, 256 << 10, 256 << 10, 128 << 10};
  std::vector<Lifetime> allocs;
  int64_t t = 0;
  std::vector<size_t> activations;
  for (int64_t s : sizes) {
    activations.push_back(allocs.size());
    allocs.push_back({s, t++, -1});
  }
  size_t previous_grad = SIZE_MAX;
  for (size_t k = sizes.size(); k-- > 0;) {
    const size_t grad = allocs.size();
    allocs.push_back({sizes[k], t++, -1});
    if (previous_grad != SIZE_MAX) allocs[previous_grad].freed_at = t++;
    allocs[activations[k]].freed_at = t++;
    previous_grad = grad;
  }
  allocs[previous_grad].freed_at = t++;
  const StepPlan plan = plan_offsets(allocs, 64);
  const int64_t peak = peak_live_bytes(allocs);
  EXPECT_GE(plan.total_bytes, peak);
  EXPECT_LE(plan.total_bytes, peak + peak / 50);
}

// An allocation still live when the step ends outlives the block: it gets no offset and shares no bytes.
TEST(StepPlan, AllocationsNeverFreedAreLeftOutOfTheBlock) {
  const StepPlan plan = plan_offsets({{100, 0, 3}, {5000, 1, -1}, {200, 2, 4}}, 64);
  ASSERT_EQ(plan.offsets.size(), 3u);
  EXPECT_EQ(plan.offsets[1], -1);
  EXPECT_TRUE(plan.shares_memory_with[1].empty());
  EXPECT_NE(plan.offsets[0], plan.offsets[2]);  // live together
  EXPECT_EQ(plan.total_bytes, 128 + 256);       // the 5000 bytes take no room
  for (const auto& shares : plan.shares_memory_with) EXPECT_EQ(std::count(shares.begin(), shares.end(), 1), 0);
}

TEST(StepPlan, PeakLiveBytesCountsOnlyOverlappingLifetimes) {
  EXPECT_EQ(peak_live_bytes({{10, 0, 2}, {20, 2, 4}}), 20);
  EXPECT_EQ(peak_live_bytes({{10, 0, 3}, {20, 2, 4}}), 30);
  // Never freed within the step (freed_at -1): live from its allocation on.
  EXPECT_EQ(peak_live_bytes({{10, 0, -1}}), 10);
  EXPECT_EQ(peak_live_bytes({{20, 0, 2}, {10, 1, -1}, {5, 3, 4}}), 30);
  EXPECT_EQ(plan_offsets({{10, 0, 2}, {20, 2, 4}}, 64).total_bytes, 64);
  EXPECT_EQ(plan_offsets({{10, 0, 3}, {20, 2, 4}}, 64).total_bytes, 128);
}

}  // namespace
}  // namespace ddp
