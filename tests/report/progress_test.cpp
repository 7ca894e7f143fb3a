// Progress output on a TTY, through a pipe, and off; only rank 0 prints.
//
// A live bar redrawn in place on a real TTY (run under script(1)), plain lines when piped, nothing with
// progress = off; other ranks print nothing but errors; the run summary at the end.
#include "report/progress.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

std::string progress_config(const TempDir& dir) {
  return write_tiny_job(dir, 640, 32, 20,
                        {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.epochs=2",
                         "metrics.log_every_steps=10", "job.threads=1"});
}

TEST(Progress, BarOnARealTerminalRedrawsInPlace) {
  TempDir dir;
  std::string cfg = progress_config(dir);
  auto r = run_command("script -qec " + shell_quote(ddptrain_path() + " " + cfg) + " /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(count_of(r.output, "\repoch 1/2 ["), 2u) << r.output;  // redrawn with carriage returns
  EXPECT_NE(r.output.find("\repoch 2/2 [########################] 40/40 loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("samples/s ETA "), std::string::npos);
  EXPECT_EQ(r.output.find("epoch 1/2 step 10/80"), std::string::npos);  // no plain lines on a TTY
  EXPECT_NE(r.output.find("eval epoch 1: loss"), std::string::npos);
  EXPECT_NE(r.output.find("summary"), std::string::npos);
}

TEST(Progress, PlainLinesWhenPipedAndNothingWhenOff) {
  TempDir dir;
  std::string cfg = progress_config(dir);
  auto r = run_command(ddptrain_path() + " " + cfg + " | cat");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_NE(r.output.find("epoch 1/2 step 10/80 loss "), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "epoch 2/2 step "), 4u) << r.output;  // steps 50, 60, 70, 80
  EXPECT_NE(r.output.find("  final eval accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  model                  " + dir / "out/model.pt"), std::string::npos) << r.output;
  auto off = run_command(ddptrain_path() + " " + cfg + " --metrics.progress=off --job.out_dir=" + dir / "off");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_EQ(off.output, "");
}

TEST(Progress, SetupBannerAndResumePoint) {
  TempDir dir;
  std::string cfg = progress_config(dir);
  auto r = run_command(ddptrain_path() + " " + cfg + " --training.max_steps=30 --checkpoint.every_steps=20" +
                       " --training.grad_accum_steps=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& part :
       {std::string("world 1 | backend none | device cpu"), std::string("model net (21840 parameters)"),
        std::string("data mnist train 640 test 32"),
        std::string("batch 16 per rank x 1 ranks x 2 accumulation = 32 per step | 20 steps/epoch | amp off"),
        "outputs in " + dir / "out"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  auto resumed =
      run_command(ddptrain_path() + " " + cfg + " --checkpoint.every_steps=20 --training.grad_accum_steps=2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + dir / "out/checkpoints/step-00000030.pt" +
                                " at step 30 (epoch 2, micro-batch 20)"),
            std::string::npos)
      << resumed.output;
}

TEST(Progress, OnlyRankZeroPrints) {
  TempDir dir;
  std::string cfg = progress_config(dir);
  auto rs = run_ranks(2, cfg);
  for (auto& r : rs) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(rs[0].output.find("summary"), std::string::npos);
  EXPECT_EQ(rs[1].output, "");
}

// Warnings take the same rank-0 path as every other line: rank 0 prints them on stderr even with the display off,
// the other ranks print nothing.
TEST(Progress, WarningsGoToStderrOnRankZeroWhateverTheMode) {
  for (const ProgressMode mode : {ProgressMode::Off, ProgressMode::Plain}) {
    Progress rank0(mode, true), rank1(mode, false);
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    rank0.warning("the config differs");
    rank1.warning("from rank 1");
    const std::string err = ::testing::internal::GetCapturedStderr();
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(err, "warning: the config differs\n");
    EXPECT_EQ(out, "");
  }
}

// "auto" under Open MPI is plain even on a terminal (mpirun gives each rank a pty: MpirunProgress shows it with the
// real mpirun); elsewhere it follows the terminal, and a forced mode is kept.
TEST(Progress, AutoModeIsPlainUnderOpenMpiAndFollowsTheTerminalElsewhere) {
  const std::map<std::string, std::string> none, ompi{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
      slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}, torchrun{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  using M = ProgressMode;
  EXPECT_EQ(resolve_progress_mode(M::Auto, true, none), M::Bar);
  EXPECT_EQ(resolve_progress_mode(M::Auto, false, none), M::Plain);
  EXPECT_EQ(resolve_progress_mode(M::Auto, true, ompi), M::Plain);
  EXPECT_EQ(resolve_progress_mode(M::Auto, false, ompi), M::Plain);
  EXPECT_EQ(resolve_progress_mode(M::Auto, true, slurm), M::Bar);  // srun --pty: the user's interactive terminal
  EXPECT_EQ(resolve_progress_mode(M::Auto, false, slurm), M::Plain);
  EXPECT_EQ(resolve_progress_mode(M::Auto, true, torchrun), M::Bar);
  for (const M forced : {M::Bar, M::Plain, M::Off}) {
    EXPECT_EQ(resolve_progress_mode(forced, true, ompi), forced);
    EXPECT_EQ(resolve_progress_mode(forced, false, none), forced);
  }
}

TEST(Progress, BarRendering) {
  StepRecord s;
  s.epoch = 2;
  s.epochs = 3;
  s.step_in_epoch = 6;
  s.steps_in_epoch = 12;
  s.loss = 0.5;
  s.accuracy = 0.75;
  s.lr = 0.01;
  s.loss_scale = 65536;
  s.samples_per_s = 1234;
  EXPECT_EQ(Progress::render_bar(s, 75, 10),
            "epoch 2/3 [#####.....] 6/12 loss 0.5000 acc 0.7500 lr 0.01 scale 6.55e+04 1234 samples/s ETA 01:15");
  s.loss = NAN;
  EXPECT_NE(Progress::render_bar(s, NAN, 10).find("loss - acc 0.7500"), std::string::npos);
  EXPECT_NE(Progress::render_bar(s, NAN, 10).find("ETA --:--"), std::string::npos);
}

}  // namespace
}  // namespace ddp::test
