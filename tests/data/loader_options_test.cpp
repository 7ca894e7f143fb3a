// The loader a run configures: what data.workers = "auto" resolves to.
#include "data/loader_options.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

TEST(LoaderOptions, AutoWorkersAreTheCpusLeftToTheRank) {
  const IntOrAuto automatic{true, 0};
  EXPECT_EQ(resolve_workers(automatic, 16, 1, 1), 15);  // one rank on a GPU
  EXPECT_EQ(resolve_workers(automatic, 16, 2, 1), 7);
  EXPECT_EQ(resolve_workers(automatic, 2, 1, 2), 1);  // a CPU rank whose step takes every core still reads
  EXPECT_EQ(resolve_workers(automatic, 512, 1, 1), 64);
  EXPECT_EQ(resolve_workers(IntOrAuto{false, 3}, 16, 1, 1), 3);
  EXPECT_EQ(resolve_workers(IntOrAuto{false, 0}, 16, 1, 1), 0);
}

}  // namespace
}  // namespace ddp::test
