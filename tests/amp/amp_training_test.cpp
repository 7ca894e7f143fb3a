// AMP in training: bf16 and fp16 autocast with dynamic loss scaling.
//
// Overflows from a huge init_scale back off and train with ranks bit-identical; an inf on one rank makes every
// rank skip; fp16 autocast trains with loss scaling. Each on the CPU and, as OnDevice/.../Cuda, on a GPU.
#include "data/idx.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <iostream>
#include <regex>

namespace ddp::test {
namespace {

std::string amp_config(const TempDir& dir) {
  return write_tiny_job(
      dir, 320, 64, 14,
      {"job.seed=4", "job.out_dir=" + dir / "out", "data.batch_size=16", "model.dropout=0.0", "optimizer.lr=0.05",
       "optimizer.momentum=0.9", "training.epochs=2", "amp.enabled=true", "amp.dtype=bf16", "amp.loss_scaling=dynamic",
       "dist.check_replicas_every=1", "metrics.log_every_steps=1"});
}

std::vector<double> field_values(const std::string& jsonl, const std::string& key) {
  std::vector<double> out;
  std::regex re("\"kind\":\"train\".*\"" + key + "\":([-0-9.eE+]+)");
  std::smatch m;
  std::istringstream in(jsonl);
  std::string line;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) out.push_back(std::stod(m[1]));
  return out;
}

using AmpTraining = OnDevice;

TEST_P(AmpTraining, HugeInitScaleOverflowsBacksOffThenTrainsWithRanksIdentical) {
  TempDir dir;
  std::string cfg = amp_config(dir);
  // Inputs scaled up (std 0.02) give gradients above 1, so 3.4e38 x gradient overflows float.
  auto results =
      run_ranks(2, cfg + " --amp.init_scale=3.4e38 --amp.growth_interval=5 --data.std=0.02 --optimizer.lr=0.002" +
                       device_flags(2));
  for (auto& r : results) ASSERT_EQ(r.exit_code, 0) << r.output;  // check_replicas_every = 1 passed
  const std::string metrics = read_file(dir / "out/metrics.jsonl");
  auto scales = field_values(metrics, "loss_scale");
  auto skipped = field_values(metrics, "skipped_steps");
  auto losses = field_values(metrics, "loss");
  ASSERT_EQ(scales.size(), 20u);
  EXPECT_GE(skipped.front(), 1);             // the first step overflowed and was skipped
  EXPECT_LT(scales.front(), 3.4e38);         // and the scale backed off
  EXPECT_LT(skipped.back(), scales.size());  // most steps were taken
  // Loss scale grows again after growth_interval clean steps at some point.
  bool grew = false;
  for (size_t i = 1; i < scales.size(); ++i) grew = grew || scales[i] > scales[i - 1];
  EXPECT_TRUE(grew);
  // It trains: the last loss is below the loss of the first step taken after the overflows (the untrained model's,
  // about ln 10 = 2.3 for 10 classes), a step size far above any kernel's rounding.
  EXPECT_LT(losses.back(), losses[static_cast<size_t>(skipped.back())]);
  std::cout << "[ measured ] loss " << losses[static_cast<size_t>(skipped.back())] << " at the first step taken, "
            << losses.back() << " at the last\n";
}

// Black images everywhere but one white one, which rank 1 alone trains on at step 3 (data.shuffle = false:
// DistributedSampler gives rank r the samples r, r + 2, ...; rank 1's third batch of 16 starts at sample 65). With
// data.std = 1e-4 it is an input of 10^4 per pixel: fp16 autocast overflows in the forward on rank 1 only.
TEST_P(AmpTraining, InfOnOneRankMakesEveryRankSkipThatStep) {
  TempDir dir;
  std::string cfg = amp_config(dir);
  torch::Tensor images = torch::zeros({320, 28, 28}, torch::kUInt8);
  images[65].fill_(255);
  write_idx(dir / "data/train-images-idx3-ubyte.gz", images);
  auto results = run_ranks(2, cfg +
                                  " --amp.dtype=float16 --amp.init_scale=1024 --amp.growth_interval=1000 "
                                  "--data.shuffle=false --data.mean=0 --data.std=1e-4 --training.max_steps=6" +
                                  device_flags(2));
  for (auto& r : results) ASSERT_EQ(r.exit_code, 0) << r.output;  // replicas still bit-identical every step
  auto skipped = field_values(read_file(dir / "out/metrics.jsonl"), "skipped_steps");
  auto scales = field_values(read_file(dir / "out/metrics.jsonl"), "loss_scale");
  ASSERT_EQ(skipped.size(), 6u);
  EXPECT_EQ(skipped[1], 0);
  EXPECT_EQ(skipped[2], 1);  // step 3 skipped everywhere
  EXPECT_EQ(skipped[5], 1);
  EXPECT_EQ(scales[1], 1024);
  EXPECT_EQ(scales[2], 512);  // backed off once
}

// fp16 autocast (on the CPU since LibTorch 2.x; 1.13 could not) trains with loss scaling on.
TEST_P(AmpTraining, Fp16TrainsWithDynamicLossScaling) {
  TempDir dir;
  std::string cfg = amp_config(dir);
  auto r = run_command(ddptrain_path() + " " + cfg + " --amp.dtype=fp16" + device_flags(1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto scales = field_values(read_file(dir / "out/metrics.jsonl"), "loss_scale");
  ASSERT_FALSE(scales.empty());
  for (double s : scales) EXPECT_GT(s, 1.0);  // scaled: GradScaler on (amp.loss_scaling = "auto" with fp16)
}

// A checkpoint written without loss scaling (bf16) resumed with fp16: the scaler starts at amp.init_scale, and the run
// says so (Python's GradScaler.load_state_dict refuses the empty state such a checkpoint holds).
TEST(AmpResume, ACheckpointWithoutLossScalerStateIsResumedWithAFreshScaleAndSaysSo) {
  TempDir dir;
  const std::string cfg = amp_config(dir) + " --checkpoint.every_steps=4 --amp.init_scale=4096";
  const CommandResult first =
      run_command(ddptrain_path() + " " + cfg + " --training.max_steps=4 --amp.loss_scaling=auto");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("no loss scaler state"), std::string::npos) << first.output;
  const CommandResult resumed = run_command(ddptrain_path() + " " + cfg + " --amp.dtype=fp16 --training.max_steps=5");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("warning: the checkpoint holds no loss scaler state (written without float16 loss "
                                "scaling): the scale starts at amp.init_scale = 4096"),
            std::string::npos)
      << resumed.output;
  const std::vector<double> scales = field_values(read_file(dir / "out/metrics.jsonl"), "loss_scale");
  ASSERT_FALSE(scales.empty());
  EXPECT_EQ(scales.back(), 4096);  // step 5: the first after the resume, no overflow at this scale
}

INSTANTIATE_ON_DEVICES(AmpTraining);

}  // namespace
}  // namespace ddp::test
