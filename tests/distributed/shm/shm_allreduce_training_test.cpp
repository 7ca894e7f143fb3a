// Shared-memory all-reduce in ddptrain runs: same model as Gloo, fallback and strict mode, a dead peer named.
//
// A rank started under `unshare -p -m` with its own /proc and /dev/shm cannot open rank 0's segment (peers open it
// through /proc/<rank 0's pid>/fd), as a rank on another host could not: "auto" then keeps Gloo on every rank, "shm"
// fails on every rank.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <chrono>

namespace ddp::test {
namespace {

std::string tiny_shm_job(const TempDir& dir) {
  return write_tiny_job(dir, 512, 64, 3,
                        {"job.seed=5", "model.name=net", "data.batch_size=16", "optimizer.lr=0.05",
                         "optimizer.momentum=0.9", "metrics.log_every_steps=4", "metrics.progress=plain"});
}

TEST(ShmAllreduceTraining, SameModelAsGlooBitForBitAndNamedInTheBanner) {
  TempDir dir;
  const std::string cfg = tiny_shm_job(dir);
  for (std::string compression : {"none", "fp16", "bf16"}) {
    const std::string common = cfg + " --dist.grad_compression=" + compression;
    auto shm = run_ranks(2, common + " --dist.allreduce=shm --job.out_dir=" + dir / ("shm-" + compression));
    auto gloo = run_ranks(2, common + " --dist.allreduce=gloo --job.out_dir=" + dir / ("gloo-" + compression));
    for (auto& r : shm) ASSERT_EQ(r.exit_code, 0) << r.output;
    for (auto& r : gloo) ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string said = compression == "none" ? "\n" : ", gradients as " + compression + "\n";
    EXPECT_NE(shm[0].output.find("| all-reduce shared memory" + said), std::string::npos) << shm[0].output;
    EXPECT_NE(gloo[0].output.find("| all-reduce gloo" + said), std::string::npos) << gloo[0].output;
    const std::string a = read_file(dir / ("shm-" + compression) + "/model.pt");
    const std::string b = read_file(dir / ("gloo-" + compression) + "/model.pt");
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "model.pt differs with grad_compression = " << compression << ", max |diff| = "
                        << max_state_diff(dir / ("shm-" + compression) + "/model.pt",
                                          dir / ("gloo-" + compression) + "/model.pt");
  }
}

// Rank 1 in a pid and mount namespace with a private /proc and /dev/shm, rank 0 as usual; returns {rank 0, rank 1}.
std::vector<RankResult> run_with_rank1_elsewhere(const TempDir& dir, const std::string& args) {
  const std::string env =
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " OMP_NUM_THREADS=1 ";
  const std::string rank1 = "RANK=1 LOCAL_RANK=1 " + env + as_own_host() + ddptrain_path() + " " + args;
  auto r = run_command("(" + rank1 + " > " + dir / "rank1.log" + " 2>&1; echo $? > " + dir / "rank1.rc" +
                       ") & RANK=0 LOCAL_RANK=0 " + env + "timeout -s KILL 120 " + ddptrain_path() + " " + args +
                       "; rc=$?; wait; exit $rc");
  RankResult r0{r.exit_code, r.output};
  RankResult r1{std::stoi(read_file(dir / "rank1.rc")), read_file(dir / "rank1.log")};
  return {r0, r1};
}

TEST(ShmAllreduceTraining, RankWithoutRankZerosSegmentKeepsGlooOrFailsWhenShmIsRequired) {
  if (!own_host_allowed()) GTEST_SKIP() << "cannot make a pid and mount namespace here (needs root / CAP_SYS_ADMIN)";
  TempDir dir;
  const std::string cfg = tiny_shm_job(dir);
  auto fallback = run_with_rank1_elsewhere(dir, cfg + " --job.out_dir=" + dir / "auto");
  ASSERT_EQ(fallback[0].exit_code, 0) << fallback[0].output;
  ASSERT_EQ(fallback[1].exit_code, 0) << fallback[1].output;
  EXPECT_NE(fallback[0].output.find("| all-reduce gloo (shared memory not used: rank 1: cannot open /proc/"),
            std::string::npos)
      << fallback[0].output;
  // Same result as plain Gloo.
  auto gloo = run_ranks(2, cfg + " --dist.allreduce=gloo --job.out_dir=" + dir / "gloo");
  for (auto& r : gloo) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(max_state_diff(dir / "auto/model.pt", dir / "gloo/model.pt"), 0.0);

  auto strict = run_with_rank1_elsewhere(dir, cfg + " --dist.allreduce=shm --job.out_dir=" + dir / "strict");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(strict[static_cast<size_t>(r)].exit_code, 1) << strict[static_cast<size_t>(r)].output;
    EXPECT_NE(strict[static_cast<size_t>(r)].output.find(
                  "error: dist.allreduce = \"shm\" but shared memory cannot be used: rank 1: cannot open"),
              std::string::npos)
        << strict[static_cast<size_t>(r)].output;
  }
}

TEST(ShmAllreduceTraining, ADeadPeerIsNamedWithinAFewSeconds) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 4000, 16, 1);
  const std::string cfg = write_mnist_job(
      dir, dir / "data",
      {"data.batch_size=8", "training.epochs=50", "dist.timeout_s=60.0", "dist.allreduce=shm", "metrics.progress=off"});
  const std::string env =
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " OMP_NUM_THREADS=1 ";
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 is killed (SIGKILL) after 3 s, mid-training; rank 0 must not wait out its 60 s timeout.
  auto r = run_command("(RANK=1 " + env + "timeout -s KILL 3 " + ddptrain_path() + " " + cfg +
                       " >/dev/null 2>&1 &) ; RANK=0 " + env + "timeout -s KILL 60 " + ddptrain_path() + " " + cfg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[rank 0] error: shared-memory all-reduce: rank 1 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(") exited during an all-reduce"), std::string::npos) << r.output;
  EXPECT_LT(secs, 8.0) << r.output;
}

}  // namespace
}  // namespace ddp::test
