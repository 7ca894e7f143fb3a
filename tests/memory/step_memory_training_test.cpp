// ddptrain with job.step_memory = "planned" and "malloc" (the default): the same model.pt, and the plan in use.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

TEST(StepMemoryTraining, PlannedAndMallocGiveTheSameModelBitForBit) {
  TempDir dir;
  // 512 samples / (2 ranks x 16) = 16 steps per epoch, 2 epochs: the plan is recorded at step 3; each epoch's
  // evaluation runs outside steps.
  const std::string cfg = write_tiny_job(dir, 512, 64, 3,
                                         {"job.seed=5", "model.name=net", "data.batch_size=16", "optimizer.lr=0.05",
                                          "optimizer.momentum=0.9", "training.epochs=2", "metrics.progress=plain"});
  auto planned = run_ranks(2, cfg + " --job.step_memory=planned --job.out_dir=" + dir / "planned");
  auto plain = run_ranks(2, cfg + " --job.out_dir=" + dir / "malloc");
  for (auto& r : planned) ASSERT_EQ(r.exit_code, 0) << r.output;
  for (auto& r : plain) ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string a = read_file(dir / "planned/model.pt"), b = read_file(dir / "malloc/model.pt");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "max |diff| = " << max_state_diff(dir / "planned/model.pt", dir / "malloc/model.pt");

  std::smatch m;
  const std::regex row(R"(step memory\s+planned block [0-9.]+ MiB, (\d+) of (\d+) steps from it)");
  ASSERT_TRUE(std::regex_search(planned[0].output, m, row)) << planned[0].output;
  EXPECT_EQ(std::stoi(m[2]), 32);
  EXPECT_GE(std::stoi(m[1]), 32 - 3 - 1) << "all but the first 3 steps and the epoch change";
  EXPECT_EQ(plain[0].output.find("step memory"), std::string::npos) << plain[0].output;
}

}  // namespace
}  // namespace ddp::test
