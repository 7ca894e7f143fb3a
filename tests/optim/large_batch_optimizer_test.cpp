// optimizer.name = "lars" and "lamb" against timm.optim.Lars and timm.optim.Lamb under DDP, and their resume.
#include "tests/checkpoint/resume_job.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

struct TimmCase {
  std::string name;
  std::string ours;    // ddptrain overrides
  std::string python;  // ddp_reference.py flags
};

class LarsLambVsTimm : public ::testing::TestWithParam<TimmCase> {};

// 25 steps on 2 ranks of ddptrain and of PyTorch DDP with timm's optimizer (tests/python/ddp_reference.py), from the
// same weights, batches and schedule; weight decay 0 for norm layers and biases in their own groups (torchvision's
// set_weight_decay), so that both the adapted and the unadapted groups are exercised.
//
// Why 1e-4: both sides run the same kernels on the same batches and all-reduce through c10d's Reducer; the update is
// timm's, written with the same ATen calls in the same order, so what differs is the loss's and the gradient
// average's composition, a few units of u = 2^-24 per step that momentum and the following gradients carry on (as
// DdpTest.MatchesPythonDdpAfter20MomentumSteps, bound 1e-4 for 20 SGD steps). The trust ratio and LAMB's
// normalised step do not amplify a relative difference: each is a ratio of norms of the same tensors; the steps do,
// where they are large enough to make training chaotic: LARS at lr 2 and trust_coeff 0.02 ended 1.3e-4 apart (the
// per-parameter loop and foreach alike), at lr 0.5 2.4e-7, so the cases keep to steps that train without that.
// Measured natively (AVX-512), on AVX2's paths and on the plain path: 2.1-5.6e-7 (LARS, LAMB with its clip),
// 4.6e-6-1.2e-5 (LAMB adapting every group), 2.5-3.5e-5 (LARS with Nesterov momentum, which adds the buffer twice). A
// wrong trust ratio, a missing clip or bias correction, or a group adapted that should not be moves weights by 1e-3 and
// more.
TEST_P(LarsLambVsTimm, WeightsMatchAfter25StepsOnTwoRanks) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  write_tiny_mnist(dir / "data", 400, 32, 5);
  const std::string scripts = source_dir() + "/tests/python";
  ASSERT_EQ(run_command(python() + " " + scripts + "/make_net_init.py " + dir / "init.pt" + " 11").exit_code, 0);
  const TimmCase& c = GetParam();
  const CommandResult ref = run_python_ranks(
      2, scripts + "/ddp_reference.py --data " + dir / "data" + " --init " + dir / "init.pt" + " --out " +
             dir / "python.pt" + " --steps 25 --batch 16 --seed 3 --norm-weight-decay 0 --bias-weight-decay 0 " +
             c.python);
  ASSERT_TRUE(std::filesystem::exists(dir / "python.pt")) << ref.output;
  const std::string cfg =
      write_mnist_job(dir, dir / "data",
                      {"job.out_dir=" + dir / "out", "job.seed=3", "data.batch_size=16", "model.name=net",
                       "model.dropout=0.0", "model.init_from=" + dir / "init.pt", "training.epochs=5",
                       "training.max_steps=25", "optimizer.norm_weight_decay=0", "optimizer.bias_weight_decay=0"});
  const auto ours = run_ranks(2, cfg + " " + c.ours);
  for (size_t r = 0; r < ours.size(); ++r) ASSERT_EQ(ours[r].exit_code, 0) << "rank " << r << ":\n" << ours[r].output;
  const double diff = max_state_diff(dir / "out/model.pt", dir / "python.pt");
  report_figure(c.name + ", 2 ranks vs Python DDP with timm, max abs diff after 25 steps", diff);
  EXPECT_LE(diff, 1e-4);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // it trained
}

INSTANTIATE_TEST_SUITE_P(
    Optim, LarsLambVsTimm,
    ::testing::Values(
        TimmCase{"lars_momentum_wd",
                 "--optimizer.name=lars --optimizer.lr=0.5 --optimizer.momentum=0.9 --optimizer.weight_decay=0.0005 "
                 "--optimizer.trust_coeff=0.02",
                 "--optimizer lars --lr 0.5 --momentum 0.9 --weight_decay 0.0005 --trust_coeff 0.02"},
        TimmCase{"lars_nesterov_foreach",
                 "--optimizer.name=lars --optimizer.lr=0.5 --optimizer.momentum=0.9 --optimizer.nesterov=true "
                 "--optimizer.weight_decay=0.0001 --optimizer.trust_coeff=0.05 --optimizer.foreach=on",
                 "--optimizer lars --lr 0.5 --momentum 0.9 --nesterov 1 --weight_decay 0.0001 --trust_coeff 0.05 "
                 "--foreach 1"},
        TimmCase{"lamb_wd_clip",
                 "--optimizer.name=lamb --optimizer.lr=0.01 --optimizer.eps=1e-6 --optimizer.weight_decay=0.01",
                 "--optimizer lamb --lr 0.01 --eps 1e-6 --weight_decay 0.01 --max_grad_norm 1.0"},
        TimmCase{"lamb_trust_clip_always_adapt_no_clip",
                 "--optimizer.name=lamb --optimizer.lr=0.005 --optimizer.weight_decay=0.02 --optimizer.trust_clip=true "
                 "--optimizer.always_adapt=true --optimizer.max_grad_norm=0",
                 "--optimizer lamb --lr 0.005 --eps 1e-8 --weight_decay 0.02 --trust_clip 1 --always_adapt 1 "
                 "--max_grad_norm 0"}),
    [](const auto& info) { return info.param.name; });

// A run stopped at step 7 and resumed from its checkpoint ends with the uninterrupted run's weights, to the bit: the
// momentum buffers (LARS), the moments and the param groups' step count (LAMB) come back from the checkpoint.
TEST(LarsLambResume, AResumedRunEndsBitIdenticalToTheUninterruptedOne) {
  for (const std::string optimizer :
       {"--optimizer.name=lars --optimizer.lr=1 --optimizer.weight_decay=0.001 --optimizer.trust_coeff=0.02",
        "--optimizer.name=lamb --optimizer.lr=0.005 --optimizer.weight_decay=0.01"}) {
    SCOPED_TRACE(optimizer);
    TempDir dir;
    const std::string cfg = ckpt_job_config(dir) + " --training.epochs=1 " + optimizer;
    const CommandResult full = ckpt_train(cfg, "--job.out_dir=" + dir / "full");
    ASSERT_EQ(full.exit_code, 0) << full.output;
    ASSERT_EQ(ckpt_train(cfg, "--job.out_dir=" + dir / "part --training.max_steps=7").exit_code, 0);
    const CommandResult resumed = ckpt_train(cfg, "--job.out_dir=" + dir / "part");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("at step 7"), std::string::npos) << resumed.output;
    EXPECT_TRUE(ckpt_same_bytes(dir / "full/model.pt", dir / "part/model.pt"))
        << "max diff " << max_state_diff(dir / "full/model.pt", dir / "part/model.pt");
  }
}

}  // namespace
}  // namespace ddp::test
