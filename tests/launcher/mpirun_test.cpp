// ddptrain under the real Open MPI mpirun: rank variables, plain progress on mpirun's pty, the missing-MASTER_ADDR
// line.
//
// Needs Debian's openmpi-bin (scripts/setup installs it). Without mpirun the tests skip saying so, and fail when
// DDP_REQUIRE_ORACLES=1 (scripts/test) so that they cannot pass by skipping.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace ddp::test {
namespace {

// Whether mpirun can be run; records the reason (and a failure when tools are required) otherwise.
bool mpirun_usable(std::string& why_not) {
  auto r = run_command("mpirun --version");
  if (r.exit_code == 0 && r.output.find("Open MPI") != std::string::npos) return true;
  why_not = "Open MPI's mpirun is not usable here (apt-get install openmpi-bin): " + r.output;
  const char* required = std::getenv("DDP_REQUIRE_ORACLES");
  if (required && std::string(required) == "1") ADD_FAILURE() << why_not << " (DDP_REQUIRE_ORACLES=1)";
  return false;
}

#define REQUIRE_MPIRUN()                                    \
  do {                                                      \
    std::string why_not_;                                   \
    if (!mpirun_usable(why_not_)) GTEST_SKIP() << why_not_; \
  } while (0)

// mpirun for `ranks` processes as root on a 2-core machine, with no rank variables of another launcher inherited;
// `flags` go to mpirun (-x VAR=..., --tag-output), `command` is what every rank runs. Output goes to a pipe.
CommandResult mpirun(int ranks, const std::string& flags, const std::string& command) {
  return run_command(
      "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u SLURM_PROCID "
      "-u SLURM_NTASKS OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none "
      "-np " +
      std::to_string(ranks) + " -x OMP_NUM_THREADS=1 " + flags + " " + command + " < /dev/null");
}

std::string mpirun_job(const TempDir& dir) {
  return write_tiny_job(dir, 640, 32, 20,
                        {"job.out_dir=" + dir / "out", "data.batch_size=16", "metrics.log_every_steps=5"});
}

std::string master_flags() { return "-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=" + std::to_string(free_port()); }

// The premise: under mpirun each rank's stdout is a terminal even though mpirun's own output goes to a pipe here.
TEST(MpirunProgress, RanksStdoutIsATerminalEvenWhenMpirunIsPiped) {
  REQUIRE_MPIRUN();
  auto r = mpirun(2, "--tag-output", "sh -c 'test -t 1 && echo stdout-is-a-tty'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(",0]<stdout>:stdout-is-a-tty"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(",1]<stdout>:stdout-is-a-tty"), std::string::npos) << r.output;
}

TEST(MpirunProgress, OneRankPrintsPlainLinesUnlessBarIsForced) {
  REQUIRE_MPIRUN();
  TempDir dir;
  const std::string cfg = mpirun_job(dir);
  auto r = mpirun(1, "", ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("world 1 | backend none"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nepoch 1/1 step 5/40 loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nepoch 1/1 step 40/40 loss "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  auto bar = mpirun(1, "", ddptrain_path() + " " + cfg + " --metrics.progress=bar --job.out_dir=" + dir / "bar");
  ASSERT_EQ(bar.exit_code, 0) << bar.output;
  EXPECT_NE(bar.output.find("\repoch 1/1 ["), std::string::npos) << bar.output;
  EXPECT_EQ(bar.output.find("epoch 1/1 step 5/40"), std::string::npos) << bar.output;
}

// Two ranks joined through OMPI_COMM_WORLD_* (and -x MASTER_ADDR/PORT) train together; rank 0 prints plain lines.
TEST(MpirunProgress, TwoRanksTrainThroughOpenMpiVariablesWithPlainLines) {
  REQUIRE_MPIRUN();
  TempDir dir;
  const std::string cfg = mpirun_job(dir);
  auto r = mpirun(2, master_flags(), ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("world 2 | backend gloo"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("batch 16 per rank x 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nepoch 1/1 step 20/20 loss "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  auto bar =
      mpirun(2, master_flags(), ddptrain_path() + " " + cfg + " --metrics.progress bar --job.out_dir " + dir / "bar");
  ASSERT_EQ(bar.exit_code, 0) << bar.output;
  EXPECT_NE(bar.output.find("\repoch 1/1 ["), std::string::npos) << bar.output;
  EXPECT_NE(bar.output.find("world 2 | backend gloo"), std::string::npos) << bar.output;
}

// Without MASTER_ADDR/MASTER_PORT every rank exits 1 with one error line naming Open MPI and mpirun -x.
TEST(MpirunRendezvous, MissingMasterAddressEveryRankExitsOneWithOneLine) {
  REQUIRE_MPIRUN();
  TempDir dir;
  const std::string cfg = mpirun_job(dir);
  // Each rank reports its exit status and exits 0, so that mpirun does not stop the other rank first.
  auto r = mpirun(2, "--tag-output", "sh -c '\"$0\" \"$@\"; echo \"exit $?\"' " + ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string tag = "," + std::to_string(rank) + "]<";
    int stderr_lines = 0;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);)
      if (line.find(tag + "stderr>:") != std::string::npos) ++stderr_lines;
    EXPECT_EQ(stderr_lines, 1) << r.output;
    EXPECT_NE(r.output.find(tag +
                            "stderr>:error: environment variables MASTER_ADDR and MASTER_PORT are required for "
                            "a world of 2 (rank " +
                            std::to_string(rank) +
                            "; launcher: Open MPI (mpirun)): pass them to every rank: mpirun -x "
                            "MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500 ...\n"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find(tag + "stdout>:exit 1\n"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace ddp::test
