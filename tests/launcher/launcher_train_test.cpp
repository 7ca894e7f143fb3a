// ddprun with the real trainer: 2 ranks on one node, 2 nodes of 1 rank (same model), a failing ddptrain rank; and
// PyTorch 2.11's own torchrun launching ddptrain (--no-python), which trains the same model.pt as ddprun.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace ddp::test {
namespace {

std::string tiny_config(const TempDir& dir) {
  return write_tiny_job(dir, 128, 32, 1,
                        {"job.out_dir=" + dir / "out", "data.batch_size=16", "model.name=net", "training.epochs=1"});
}

TEST(LauncherTrainTest, TwoRanksOnOneNodeTrainToCompletion) {
  TempDir dir;
  const std::string cfg = tiny_config(dir);
  auto r = run_command("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc_per_node=2 " + ddptrain_path() +
                       " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/model.pt"));
  // Rank 0's banner reaches the console unprefixed and says it trained as a world of 2.
  EXPECT_NE(("\n" + r.output).find("\nddptrain: job ddptrain | world 2 |"), std::string::npos) << r.output;
}

TEST(LauncherTrainTest, TwoNodesOfOneRankTrainTheSameModelAsOneNodeOfTwo) {
  TempDir dir;
  const std::string cfg = tiny_config(dir);
  const std::string port = std::to_string(free_port_pair());
  auto node = [&](int n) {
    return "OMP_NUM_THREADS=1 " + ddprun_path() + " --nproc_per_node=1 --nnodes=2 --node_rank=" + std::to_string(n) +
           " --master_addr=127.0.0.1 --master_port=" + port + " " + ddptrain_path() + " " + cfg +
           " --job.out_dir=" + dir / "two_nodes";
  };
  auto r = run_two_nodes(dir, node(0), node(1));
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "two_nodes/model.pt"));
  EXPECT_NE(r.node0.output.find("world 2"), std::string::npos) << r.node0.output;

  auto one = run_command("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node 2 " + ddptrain_path() +
                         " " + cfg + " --job.out_dir=" + dir / "one_node");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(max_state_diff(dir / "two_nodes/model.pt", dir / "one_node/model.pt"), 0.0);
}

// SIGUSR1 to ddprun (what Slurm's --signal=USR1@90 sends before the time limit): forwarded to the workers, which
// checkpoint at a step boundary and exit 75; ddprun exits 75 too (no restart), and the same command resumes to the
// uninterrupted run's model.pt.
TEST(LauncherTrainTest, Sigusr1ToDdprunCheckpointsExits75AndTheSameCommandResumesExactly) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 2000, 32, 3,
                                         {"data.batch_size=8", "model.name=net", "training.epochs=1",
                                          "metrics.log_every_steps=5", "metrics.progress=plain"});
  const std::string launch = "OMP_NUM_THREADS=1 " + ddprun_path() +
                             " --standalone --nproc_per_node=2 --max-restarts=1 " + ddptrain_path() + " " + cfg;
  ASSERT_EQ(run_command(launch + " --job.out_dir=" + dir / "full").exit_code, 0);
  const std::string part = launch + " --job.out_dir=" + dir / "part";
  auto r = run_command(part + " > " + dir / "run.log" + " 2>&1 & p=$!; for i in $(seq 300); do grep -q 'step 20/' " +
                       dir / "run.log" + " 2>/dev/null && break; sleep 0.1; done; kill -USR1 $p; wait $p; echo rc $?");
  const std::string log = read_file(dir / "run.log");
  EXPECT_NE(r.output.find("rc 75"), std::string::npos) << r.output << log;
  EXPECT_NE(log.find("stopped for requeue (SIGUSR1: a time limit ahead)"), std::string::npos) << log;
  EXPECT_NE(log.find("[ddprun] the workers checkpointed before a time limit (SIGUSR1): exit 75"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("restarting"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir / "part/model.pt"));
  auto resumed = run_command(part);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(max_state_diff(dir / "full/model.pt", dir / "part/model.pt"), 0.0);
}

TEST(LauncherTrainTest, TorchrunTrainsTheSameModelAsDdprunBitForBit) {
  if (!python_has_modules("torch.distributed.run")) GTEST_SKIP() << python() << " does not have torch.distributed.run";
  TempDir dir;
  const std::string cfg = tiny_config(dir);
  // torchrun's agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True): ddptrain joins it as a client.
  auto torchrun = run_command("OMP_NUM_THREADS=1 " + shell_quote(python()) +
                              " -m torch.distributed.run --standalone --nproc-per-node 2 --no-python " +
                              ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "torchrun");
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.output;
  EXPECT_NE(torchrun.output.find("world 2"), std::string::npos) << torchrun.output;
  auto ddprun = run_command("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node 2 " +
                            ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "ddprun");
  ASSERT_EQ(ddprun.exit_code, 0) << ddprun.output;
  const std::string a = read_file(dir / "torchrun/model.pt"), b = read_file(dir / "ddprun/model.pt");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "model.pt of torchrun and ddprun differ (max |a - b| = "
                      << max_state_diff(dir / "torchrun/model.pt", dir / "ddprun/model.pt") << ")";
}

TEST(LauncherTrainTest, FailingTrainerRankStopsTheJobAndShowsItsError) {
  TempDir dir;
  const std::string cfg = tiny_config(dir);
  // Rank 1 is given a bad override and exits 2 before joining; rank 0 would wait for it at the join barrier.
  // ddptrain only acts on SIGTERM at step boundaries, so rank 0 takes the SIGKILL after --grace-period.
  const std::string wrapper = write_script(
      dir, "train.sh",
      "extra=; [ $RANK = 1 ] && extra=--training.epochs=many\nexec " + ddptrain_path() + " " + cfg + " $extra\n");
  auto r =
      run_timed("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node=2 --grace-period=2 " + wrapper);
  EXPECT_NE(r.result.exit_code, 0) << r.result.output;
  EXPECT_LT(r.seconds, 10.0) << r.result.output;
  EXPECT_NE(r.result.output.find("rank 1 (node 0, local rank 1, pid "), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("exited with code 2"), std::string::npos) << r.result.output;
  // Its error line is among the last lines ddprun shows.
  bool tail_has_error = false;
  std::istringstream lines(r.result.output);
  for (std::string line; std::getline(lines, line);)
    tail_has_error |= line.rfind("[ddprun]   | ", 0) == 0 && line.find("error:") != std::string::npos &&
                      line.find("training.epochs") != std::string::npos;
  EXPECT_TRUE(tail_has_error) << r.result.output;
}

}  // namespace
}  // namespace ddp::test
