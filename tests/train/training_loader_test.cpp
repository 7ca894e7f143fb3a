// The training loader across epochs: data.workers = "auto" says what it chose and trains the weights of batches
// assembled on the training thread, epoch after epoch on one loader, and from a checkpoint inside an epoch.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

TEST(TrainingLoader, AutoWorkersTrainTheWeightsOfTheTrainingThreadAcrossEpochsAndAResume) {
  TempDir dir;
  write_tiny_job(dir, 200, 32, 15,
                 {"job.seed=4", "data.batch_size=16", "training.epochs=3", "model.dropout=0.5", "optimizer.lr=0.05",
                  "optimizer.momentum=0.9", "job.threads=1"});
  const std::string run = ddptrain_path() + " " + dir / "cfg.toml";
  const auto serial = run_command(run + " --data.workers=0 --job.out_dir=" + dir / "serial");
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  const auto threads = run_command(run + " --data.workers=auto --data.prefetch=1 --job.out_dir=" + dir / "auto");
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  EXPECT_TRUE(std::regex_search(threads.output, std::regex("data\\.workers = \"auto\": [1-9][0-9]* loader thread")))
      << threads.output;
  EXPECT_EQ(read_file(dir / "serial/model.pt"), read_file(dir / "auto/model.pt"));
  // Stopped inside the second epoch (13 steps an epoch), then resumed to the end with three threads.
  const auto part = run_command(run +
                                " --data.workers=2 --training.max_steps=20 --checkpoint.every_steps=20 "
                                "--job.out_dir=" +
                                dir / "resumed");
  ASSERT_EQ(part.exit_code, 0) << part.output;
  const auto rest = run_command(run + " --data.workers=3 --data.prefetch=2 --job.out_dir=" + dir / "resumed");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  EXPECT_EQ(read_file(dir / "serial/model.pt"), read_file(dir / "resumed/model.pt"));
}

}  // namespace
}  // namespace ddp::test
