// Tests: a train record's samples_per_s counts the time of the interval's steps, not an evaluation or a checkpoint's
// save between them.
#include "tests/checkpoint/resume_job.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

// 12 steps an epoch, a record every 3: the interval of steps 13-15 holds the first epoch's evaluation (of a test split
// 50 times the batches a step trains) and its checkpoint, written in the foreground, its fsync made to take a second.
// Its rate is the others' (within what a busy machine makes of a few steps), not the 24 samples over the second and
// more those took.
TEST(SamplesPerS, AnIntervalLeavesOutTheEvaluationAndCheckpointBetweenItsSteps) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 96, 4800, 3,
      {"job.out_dir=" + dir / "out", "job.threads=1", "model.name=net", "data.batch_size=8", "training.epochs=2",
       "metrics.log_every_steps=3", "metrics.progress=off", "checkpoint.every_epochs=1", "checkpoint.async=false"});
  const CommandResult r = run_command("DDP_FAULT_SECONDS=1 " + fault_env("fsync", "step-00000012.pt.tmp-", "slow") +
                                      " " + ddptrain_path() + " " + cfg + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<int64_t, double> rate;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["kind"] == "train") rate[record["step"].get<int64_t>()] = record["samples_per_s"].get<double>();
  }
  ASSERT_EQ(rate.size(), 8u) << r.output;
  ASSERT_TRUE(rate.count(15)) << r.output;
  std::vector<double> others;
  for (const auto& [step, value] : rate)
    if (step != 15 && step != 3) others.push_back(value);  // step 3's interval holds the first steps' warm-up
  std::sort(others.begin(), others.end());
  const double median = others[others.size() / 2];
  EXPECT_GT(rate[15], median / 4) << "steps 13-15: " << rate[15] << " samples/s, the others' median " << median;
}

}  // namespace
}  // namespace ddp::test
