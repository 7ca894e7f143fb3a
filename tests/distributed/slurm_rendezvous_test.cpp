// Two ddptrain processes started with Slurm's variables alone (no MASTER_ADDR/MASTER_PORT) train torchrun's model.pt.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace ddp::test {
namespace {

// A port of Lightning's Slurm range (15000 + the job id's last 4 digits) that nothing on 127.0.0.1 holds now.
int free_slurm_port() {
  std::mt19937 pick(std::random_device{}());
  for (int tries = 0; tries < 200; ++tries)
    if (const int port = 15000 + static_cast<int>(pick() % 10000); port_is_free(port)) return port;
  throw std::runtime_error("no free port in 15000-24999");
}

TEST(SlurmRendezvous, SlurmVariablesAloneTrainTheTorchrunModel) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 128, 32, 1, {"data.batch_size=16", "model.name=net", "training.max_steps=4", "dist.timeout_s=60"});
  auto torchrun = run_ranks(2, cfg + " --job.out_dir=" + dir / "torchrun");
  for (const RankResult& r : torchrun) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(torchrun[0].output.find("\n  rendezvous 127.0.0.1:"), std::string::npos) << torchrun[0].output;
  EXPECT_NE(torchrun[0].output.find(" (MASTER_ADDR)\n"), std::string::npos) << torchrun[0].output;

  // A job id whose last 4 digits + 15000 is the free port; the node list's first host is this one.
  const int port = free_slurm_port();
  const std::string job_id = "31" + std::to_string(10000 + port - 15000).substr(1);
  std::string script;
  for (int rank = 0; rank < 2; ++rank)
    script +=
        "(env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE SLURM_PROCID=" + std::to_string(rank) +
        " SLURM_NTASKS=2 SLURM_LOCALID=" + std::to_string(rank) +
        " SLURM_NTASKS_PER_NODE=2 SLURM_NODEID=0 SLURM_JOB_NODELIST='localhost,node[2-3]' SLURM_JOB_ID=" + job_id +
        " OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "slurm" + " > " +
        dir / ("rank" + std::to_string(rank)) + " 2>&1; echo $? > " + dir / ("rc" + std::to_string(rank)) + ") &\n";
  run_command(script + "wait\n");
  for (int rank = 0; rank < 2; ++rank)
    ASSERT_EQ(read_file(dir / ("rc" + std::to_string(rank))), "0\n")
        << read_file(dir / ("rank" + std::to_string(rank)));
  const std::string banner = read_file(dir / "rank0");
  EXPECT_NE(banner.find("\n  rendezvous localhost:" + std::to_string(port) +
                        " (first host of SLURM_JOB_NODELIST, port from SLURM_JOB_ID)\n"),
            std::string::npos)
      << banner;
  const std::string a = read_file(dir / "torchrun/model.pt"), b = read_file(dir / "slurm/model.pt");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "model.pt of the torchrun-variable and Slurm-variable runs differ (max |a - b| = "
                      << max_state_diff(dir / "torchrun/model.pt", dir / "slurm/model.pt") << ")";
}

}  // namespace
}  // namespace ddp::test
