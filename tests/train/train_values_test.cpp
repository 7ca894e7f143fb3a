// Values that must be refused, on the real binary: refused before any step, exit 2, one error line.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace ddp {
namespace {

using test::shell_quote;

std::vector<std::string> values_error_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.find("error:") != std::string::npos) lines.push_back(line);
  return lines;
}

// Exactly one error line, starting with `prefix` and holding each of `parts`.
void expect_values_error(const std::string& output, const std::string& prefix,
                         const std::vector<std::string>& parts = {}) {
  const auto lines = values_error_lines(output);
  ASSERT_EQ(lines.size(), 1u) << output;
  EXPECT_EQ(lines[0].rfind(prefix, 0), 0u) << "line: " << lines[0] << "\nexpected prefix: " << prefix;
  for (const auto& p : parts)
    EXPECT_NE(lines[0].find(p), std::string::npos) << "missing \"" << p << "\" in " << lines[0];
}

// dir/job.toml: a synthetic-data job writing into dir/out (a second or two on CPU), plus `data` lines under [data].
std::string values_synthetic_job(const test::TempDir& dir, const std::string& model, const std::string& data) {
  const std::string path = dir / "job.toml";
  test::write_file(path, "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"synthetic\"\nworkers = 0\n" +
                             data + "[model]\nname = \"" + model + "\"\n[metrics]\nprogress = \"off\"\n");
  return path;
}

test::CommandResult values_run(const std::string& config, const std::string& overrides = "") {
  return test::run_command(shell_quote(test::ddptrain_path()) + " " + shell_quote(config) + " " + overrides);
}

// The job with `overrides` exits `code` with one error line (prefix, parts) and writes no model.pt.
void expect_refused(const std::string& config, const std::string& overrides, int code, const std::string& prefix,
                    const std::vector<std::string>& parts = {}) {
  SCOPED_TRACE(overrides);
  auto r = values_run(config, overrides);
  EXPECT_EQ(r.exit_code, code) << r.output;
  expect_values_error(r.output, prefix, parts);
  EXPECT_EQ(r.output.find("can't allocate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Expected more than 1 value per channel"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(config).parent_path() / "out/model.pt"));
}

// The job with `overrides` trains and writes model.pt.
void expect_trains(const std::string& config, const std::string& overrides = "") {
  auto r = values_run(config, overrides);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(config).parent_path() / "out/model.pt"));
}

// A dataset smaller than one batch with drop_last trains no step: that is an error, not an untrained model.pt and exit 0.
TEST(TrainValues, ZeroOptimizerStepsIsAnErrorNotAnUntrainedModel) {
  test::TempDir dir;
  const auto cfg = values_synthetic_job(dir, "net",
                                        "synthetic_train_size = 10\nsynthetic_test_size = 4\nbatch_size = 16\n"
                                        "drop_last = true\n");
  expect_refused(cfg, "", 2, "error: no optimizer steps to take: 10 training samples over 1 rank(s) = 10 per rank",
                 {"data.drop_last = true drops a batch smaller than data.batch_size = 16",
                  "lower data.batch_size, set data.drop_last = false"});
  expect_trains(cfg, "--data.drop_last=false");  // the same data without drop_last: one partial batch
}

// batch_size 2^63-1 overflowed the steps-per-epoch arithmetic to zero steps (exit 0, untrained model.pt); huge epochs
// overflowed epochs x steps; a timeout of 1e300 s was accepted.
TEST(TrainValues, HugeBatchSizeEpochsOrTimeoutAreRefusedNamingTheKey) {
  test::TempDir dir;
  const auto cfg = values_synthetic_job(dir, "net", "synthetic_train_size = 16\nsynthetic_test_size = 4\n");
  expect_refused(cfg, "--data.batch_size=9223372036854775807", 2,
                 "error: --data.batch_size=9223372036854775807: data.batch_size must be >= 1 and <= ");
  expect_refused(cfg, "--training.epochs=4611686018427387904", 2,
                 "error: --training.epochs=4611686018427387904: training.epochs must be >= 0 and <= ");
  expect_refused(cfg, "--dist.timeout_s=1e300", 2,
                 "error: --dist.timeout_s=1e300: dist.timeout_s must be >= 0.001 and <= 604800.0");
  // The largest epochs with max_steps: epochs x steps per epoch does not overflow; max_steps ends the run.
  expect_trains(cfg, "--training.epochs=1000000 --training.max_steps=2 --data.batch_size=8");
}

// ResNet's last BatchNorm sees 1x1 maps on 28x28 images: a training batch of one sample failed at the epoch's end
// with LibTorch's "Expected more than 1 value per channel when training". Now refused before the first step.
TEST(TrainValues, BatchNormLastBatchOfOneIsRefusedBeforeTrainingWithTheFix) {
  test::TempDir dir;
  const auto cfg = values_synthetic_job(dir, "resnet18",
                                        "synthetic_train_size = 17\nsynthetic_test_size = 9\nbatch_size = 8\n"
                                        "eval_batch_size = 8\n");
  expect_refused(cfg, "", 2,
                 "error: data.batch_size = 8 leaves a training batch of 1 sample(s) on each rank (17 training samples "
                 "over 1 rank(s) = 17 per rank), but resnet18's BatchNorm needs at least 2 samples per batch on 28x28 "
                 "images; set data.drop_last = true");
  // The fix it names works; evaluation's last batch of one (9 = 8 + 1) is fine (BatchNorm uses running stats).
  expect_trains(cfg, "--data.drop_last=true");
}

// From 33x33 images on, ResNet's last BatchNorm sees 2x2 maps, so a batch of one trains: not refused.
TEST(TrainValues, BatchOfOneOnLargerImagesStillTrains) {
  test::TempDir dir;
  expect_trains(values_synthetic_job(dir, "resnet18",
                                     "synthetic_train_size = 9\nsynthetic_test_size = 2\nbatch_size = 8\n"
                                     "image_size = 33\n"));
}

// The DistributedSampler case: 18 samples over 2 ranks is 9 per rank, 9 % 8 = 1 on each rank (one rank alone has 2).
TEST(TrainValues, BatchNormLastBatchOfOneCountsPerRank) {
  test::TempDir dir;
  const auto cfg =
      values_synthetic_job(dir, "resnet18", "synthetic_train_size = 18\nsynthetic_test_size = 2\nbatch_size = 8\n");
  auto ranks = test::run_ranks(2, shell_quote(cfg));
  ASSERT_EQ(ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 2) << ranks[r].output;
    expect_values_error(ranks[r].output,
                        "[rank " + std::to_string(r) +
                            "] error: data.batch_size = 8 leaves a training "
                            "batch of 1 sample(s) on each rank (18 training samples over 2 rank(s) = 9 "
                            "per rank)");
  }
}

// Synthetic class templates larger than the machine's memory (a million classes of 4096x4096) are refused naming the
// keys before anything is allocated.
TEST(TrainValues, SyntheticTemplatesLargerThanMemoryNameTheKeys) {
  test::TempDir dir;
  expect_refused(values_synthetic_job(dir, "resnet18", "image_size = 4096\n"), "--model.num_classes=1000000", 1,
                 "error: model.num_classes = 1000000 class templates of 1x4096x4096 and the labels of "
                 "data.synthetic_train_size = 6000 + data.synthetic_test_size = 1000 samples need ",
                 {"GiB to hold, more than this machine's", "lower model.num_classes, data.image_size"});
}

// /dev/urandom as the config was read forever (1.9 GB and growing); a FIFO without a writer blocked.
TEST(TrainValues, ConfigThatIsNotARegularFileIsRefusedAtOnce) {
  auto r = test::run_command("timeout -s KILL 20 " + shell_quote(test::ddptrain_path()) + " /dev/urandom");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_values_error(r.output, "error: /dev/urandom: is not a regular file");
  test::TempDir dir;
  const std::string fifo = dir / "cfg.toml";
  ASSERT_EQ(test::run_command("mkfifo " + shell_quote(fifo)).exit_code, 0);
  r = test::run_command("timeout -s KILL 20 " + shell_quote(test::ddptrain_path()) + " " + shell_quote(fifo));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_values_error(r.output, "error: " + fifo + ": is not a regular file");
}

}  // namespace
}  // namespace ddp
