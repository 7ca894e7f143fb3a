// ddprun --max-restarts with ddptrain checkpoints: killed workers resume bit-identically.
//
// A worker killed with SIGKILL at several steps is restarted, resumes from the newest complete checkpoint, and
// the final model.pt is bit-identical to an uninterrupted run: on the CPU, and as OnDevice/.../Cuda on a GPU
// (training.deterministic, AMP float16 with dynamic loss scaling).
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

using LauncherRestartResume = OnDevice;

TEST_P(LauncherRestartResume, KilledWorkerRestartsAndEndsBitIdentical) {
  TempDir dir;
  write_tiny_job(
      dir, 640, 32, 21,
      {"job.seed=6", "data.batch_size=16", "model.dropout=0.5", "optimizer.lr=0.05", "optimizer.momentum=0.9",
       "training.epochs=3", "checkpoint.every_steps=10", "metrics.log_every_steps=1", "dist.timeout_s=30.0"});
  const std::string ddprun = binary_dir() + "/ddprun";
  const std::string common = " --standalone --nproc-per-node=2 --grace-period=2 ";
  const std::string config =
      dir / "cfg.toml" + (on_cuda() ? " --amp.enabled=true --amp.dtype=float16" : "") + reproducible_device_flags(2);
  auto full = run_command(ddprun + common + ddptrain_path() + " " + config + " --job.out_dir=" + dir / "full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  for (int kill_at : {13, 38}) {
    const std::string out = dir / ("killed" + std::to_string(kill_at));
    // Wait until step kill_at is logged, then SIGKILL one worker (a child of ddprun).
    auto r = run_ddprun_killing_a_worker(
        common + "--max-restarts=1 " + ddptrain_path() + " " + config + " --job.out_dir=" + out, out, kill_at);
    const std::string log = read_file(out + ".log");
    EXPECT_NE(r.output.find("rc 0"), std::string::npos) << r.output << log;
    EXPECT_NE(log.find("SIGKILL"), std::string::npos) << log;
    EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
    const bool equal = read_file(dir / "full/model.pt") == read_file(out + "/model.pt");
    if (on_cuda())
      report_figure("kill -9 at step " + std::to_string(kill_at) + " on cuda, model.pt after resume",
                    equal ? "bit-identical to the uninterrupted run" : "differs");
    EXPECT_TRUE(equal) << "kill at step " << kill_at;
  }
}

INSTANTIATE_ON_DEVICES(LauncherRestartResume);

}  // namespace
}  // namespace ddp::test
