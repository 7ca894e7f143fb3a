// Tests: training with data.mixup_alpha + data.cutmix_alpha and with data.ra_reps is deterministic and resumes
// exactly (mid-epoch, on the same world; RASampler also on another world size), and a set too small is refused.
#include "tests/checkpoint/resume_job.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

namespace ddp::test {
namespace {

// 320 samples / batch 16 = 20 micro-batches per epoch, accumulated 2 per step: 10 steps per epoch, 2 epochs.
std::string mix_job(const TempDir& dir, const std::string& mix) {
  return write_tiny_job(
             dir, 320, 32, 12,
             {"job.seed=21", "data.batch_size=16", "model.name=net", "model.dropout=0.0", "optimizer.lr=0.05",
              "optimizer.momentum=0.9", "training.epochs=2", "training.grad_accum_steps=2",
              "training.label_smoothing=0.1", "checkpoint.every_steps=4", "metrics.log_every_steps=5"}) +
         " " + mix;
}

TEST(MixTraining, MixUpCutMixRunsAreBitIdenticalAndResumeExactly) {
  TempDir dir;
  const std::string cfg = mix_job(dir, "--data.mixup_alpha=0.2 --data.cutmix_alpha=1.0");
  for (const std::string out : {"a", "b"}) {
    const CommandResult r = ckpt_train(cfg, "--job.out_dir=" + dir / out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_TRUE(ckpt_same_bytes(dir / "a/model.pt", dir / "b/model.pt"));
  ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=7").exit_code, 0);
  // The batches were mixed: the same job without mixing trains other weights in those 7 steps.
  ASSERT_EQ(ckpt_train(mix_job(dir, ""), "--job.out_dir=" + dir / "plain --training.max_steps=7").exit_code, 0);
  EXPECT_GT(max_state_diff(dir / "plain/model.pt", dir / "part/model.pt"), 1e-4);
  const CommandResult resumed = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 7"), std::string::npos) << resumed.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "a/model.pt", dir / "part/model.pt"))
      << "max diff " << max_state_diff(dir / "a/model.pt", dir / "part/model.pt");
}

TEST(MixTraining, CudaGraphWithMixingIsAConfigError) {
  TempDir dir;
  const CommandResult r =
      ckpt_train(mix_job(dir,
                         "--data.cutmix_alpha=1.0 --training.cuda_graph=true --training.grad_accum_steps=1 "
                         "--optimizer.fused=true"),
                 "--job.out_dir=" + dir / "o");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.cutmix_alpha"), std::string::npos) << r.output;
}

// 600 samples: RASampler trains 512 per epoch (256 per rank on 2), batch 16, 1 epoch.
std::string ra_job(const TempDir& dir) {
  return write_tiny_job(
      dir, 600, 32, 5,
      {"job.seed=3", "data.batch_size=16", "data.ra_reps=3", "model.name=net", "model.dropout=0.0", "optimizer.lr=0.02",
       "optimizer.momentum=0.9", "training.epochs=1", "checkpoint.every_steps=4", "metrics.log_every_steps=8"});
}

TEST(RATraining, RepeatedAugmentationResumesExactlyAndOnAnotherWorldFromTheSavedPosition) {
  TempDir dir;
  const std::string cfg = ra_job(dir);
  // One rank: 512 samples / 32 = 16 steps; stopped at step 5 and resumed, the same weights to the bit.
  const std::string one = cfg + " --data.batch_size=32";
  const CommandResult single = ckpt_train(one, "--job.out_dir=" + dir / "single");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find(" 16 steps/epoch"), std::string::npos) << single.output;
  ASSERT_EQ(ckpt_train(one, "--job.out_dir=" + dir / "one --training.max_steps=5").exit_code, 0);
  const CommandResult resumed = ckpt_train(one, "--job.out_dir=" + dir / "one");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 5"), std::string::npos) << resumed.output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "single/model.pt", dir / "one/model.pt"))
      << "max diff " << max_state_diff(dir / "single/model.pt", dir / "one/model.pt");
  // 2 ranks x 16 (256 samples per rank) stopped at step 5, resumed on 1 rank x 32: both worlds train the same 512
  // positions of the repeated order, so the result equals the uninterrupted 2 x 16 run up to float reassociation.
  auto full = run_ranks(2, cfg + " --job.out_dir=" + dir / "full");
  for (auto& r : full) ASSERT_EQ(r.exit_code, 0) << r.output;
  auto part = run_ranks(2, cfg + " --job.out_dir=" + dir / "part --training.max_steps=5");
  for (auto& r : part) ASSERT_EQ(r.exit_code, 0) << r.output;
  const CommandResult r = ckpt_train(one, "--job.out_dir=" + dir / "part");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("continues from sample 160"), std::string::npos) << r.output;
  // The resumed run takes the first steps as the full run does, bit for bit (the checkpoint is exact), and the rest
  // as the single run does: the same sums as the full run's in another order (one batch of 32 against two of 16
  // summed over the ranks). So it differs from the full run by what that reassociation does over fewer steps than the
  // single run's, which measures it; a factor 3 for how unevenly rounding grows from step to step, and a floor of
  // 1e-5 (about 170 float32 units of weights below 1) for when the two orders agree to the last bits. A resume at a
  // wrong position trains on other batches: a difference of what a step moves the weights, not of their last bits.
  const double reassociation = max_state_diff(dir / "full/model.pt", dir / "single/model.pt");
  const double resumed_diff = max_state_diff(dir / "full/model.pt", dir / "part/model.pt");
  EXPECT_LE(resumed_diff, std::max(1e-5, 3 * reassociation));
  EXPECT_LT(reassociation, 1e-3);
  std::cout << "[ measured ] max |resumed - full| " << resumed_diff << ", max |single - full| " << reassociation
            << "\n";
}

TEST(RATraining, ASetTooSmallForOneBatchNamesTheKey) {
  TempDir dir;
  const CommandResult r = ckpt_train(write_tiny_job(dir, 200, 16, 5, {"data.batch_size=16", "data.ra_reps=3"}),
                                     "--job.out_dir=" + dir / "o");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.ra_reps = 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("= 0 per rank"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ddp::test
