// A stuck peer (SIGSTOPped mid-training, alive but silent): the job ends with an error after dist.timeout_s.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

constexpr int kStuckPeerTimeoutS = 5;  // dist.timeout_s
constexpr int kGraceS = 2;             // ddprun --grace-period

// A run that trains far longer than the test lasts, logging every step; its processes carry `tag`.
struct StuckJob {
  TempDir dir;
  std::string tag = "DDPRUN_TEST_TAG=" + dir.path();
  std::string cfg;

  StuckJob() {
    cfg = write_tiny_job(dir, 512, 32, 8,
                         {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.epochs=1000",
                          "training.eval_every_epochs=0", "metrics.log_every_steps=1", "metrics.progress=plain",
                          "dist.timeout_s=" + std::to_string(kStuckPeerTimeoutS) + ".0"});
  }
  ~StuckJob() {
    for (int pid : processes_with_env(tag)) kill(pid, SIGKILL);  // only after a failed expectation
  }

  // Shell lines: wait until step 3 is logged, SIGSTOP rank `victim`'s ddptrain (found by its environment)
  // and start the clock.
  std::string stop_rank(int victim) const {
    return "for i in $(seq 600); do grep -q '\"step\":3,' " + dir / "out/metrics.jsonl" +
           " 2>/dev/null && break; sleep 0.05; done\n"
           "v=; for d in /proc/[0-9]*; do [ \"$(cat $d/comm 2>/dev/null)\" = ddptrain ] || continue; "
           "e=$(tr '\\0' '\\n' < $d/environ 2>/dev/null); echo \"$e\" | grep -qx " +
           shell_quote(tag) + " && echo \"$e\" | grep -qx RANK=" + std::to_string(victim) +
           " && v=${d#/proc/}; done\n"
           "echo \"stopping pid $v\"; kill -STOP $v; t0=$(date +%s%N)\n";
  }
  // Shell lines: wait for `pid` and print its exit code and the milliseconds since the stop.
  static std::string wait_for(const std::string& pid) {
    return "wait " + pid + "; rc=$?; echo \"rc $rc after_ms $(( ($(date +%s%N) - t0) / 1000000 ))\"\n";
  }
  // Started under `timeout`, so that a product that hangs fails the test instead of hanging it.
  std::string bounded() const { return tag + " OMP_NUM_THREADS=1 timeout -s KILL 45 "; }
};

// "rc R after_ms T" from the script's output.
void parse_end(const std::string& output, int* rc, double* seconds) {
  const size_t at = output.find("\nrc ");
  ASSERT_NE(at, std::string::npos) << output;
  std::istringstream in(output.substr(at + 4));
  std::string word;
  long ms = -1;
  in >> *rc >> word >> ms;
  ASSERT_EQ(word, "after_ms") << output;
  *seconds = ms / 1000.0;
}

void expect_timeout_error_line(const std::string& log, int rank) {
  const size_t at = log.find("[rank " + std::to_string(rank) + "] error: ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  // Gloo words it either way, depending on which of the rank's in-flight collectives times out first; the
  // shared-memory all-reduce (dist.allreduce = "auto" on one host) names the rank it waited for.
  EXPECT_TRUE(line.find("Timed out waiting " + std::to_string(kStuckPeerTimeoutS * 1000) + "ms") != std::string::npos ||
              line.find("Application timeout caused pair closure") != std::string::npos ||
              line.find("did not reach the all-reduce within dist.timeout_s = " + std::to_string(kStuckPeerTimeoutS) +
                        " s") != std::string::npos)
      << line;
  EXPECT_NE(line.find("within dist.timeout_s"), std::string::npos) << line;
}

TEST(LauncherStuckPeerTest, BareRanksEndWithATimeoutErrorWhenAPeerIsStopped) {
  StuckJob job;
  const std::string port = std::to_string(free_port());
  std::string script;
  for (int r : {0, 1})
    script += job.bounded() + "env RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
              " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " " + ddptrain_path() +
              " " + job.cfg + " > " + job.dir / ("rank" + std::to_string(r) + ".log") + " 2>&1 & p" +
              std::to_string(r) + "=$!\n";
  // Rank 1 stops; rank 0's next collective waits for it. The stopped rank is the test's to end.
  script += job.stop_rank(1) + StuckJob::wait_for("$p0") + "kill -KILL $v; wait\n";
  const auto r = run_command(script);
  const std::string log = read_file(job.dir / "rank0.log");
  int rc = -1;
  double seconds = -1;
  parse_end(r.output, &rc, &seconds);
  EXPECT_EQ(rc, 1) << r.output << log;
  EXPECT_GE(seconds, kStuckPeerTimeoutS - 1.0) << log;   // ended by the timeout ...
  EXPECT_LT(seconds, kStuckPeerTimeoutS + 15.0) << log;  // ... not long after it
  expect_timeout_error_line(log, 0);
}

// Under ddprun the rank that times out fails the job; the stopped one cannot act on SIGTERM and gets SIGKILL.
void expect_ddprun_ends_the_job(int victim) {
  StuckJob job;
  const std::string script = job.bounded() + ddprun_path() + " --standalone --nproc-per-node 2 --grace-period " +
                             std::to_string(kGraceS) + " " + ddptrain_path() + " " + job.cfg + " > " +
                             job.dir / "job.log" + " 2>&1 & p=$!\n" + job.stop_rank(victim) + StuckJob::wait_for("$p");
  const auto r = run_command(script);
  const std::string log = read_file(job.dir / "job.log");
  int rc = -1;
  double seconds = -1;
  parse_end(r.output, &rc, &seconds);
  const int other = 1 - victim;
  EXPECT_EQ(rc, 1) << r.output << log;
  EXPECT_GE(seconds, kStuckPeerTimeoutS - 1.0) << log;
  EXPECT_LT(seconds, kStuckPeerTimeoutS + kGraceS + 15.0) << log;
  expect_timeout_error_line(log, other);
  EXPECT_NE(log.find("error: the job failed: rank " + std::to_string(other) + " (node 0, local rank " +
                     std::to_string(other)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("still running " + std::to_string(kGraceS) + " s after the stop signal: sending SIGKILL"),
            std::string::npos)
      << log;
  // ddprun names the stopped rank itself (its peers can only say they timed out).
  const size_t at = r.output.find("stopping pid ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string pid = r.output.substr(at + 13, r.output.find('\n', at) - at - 13);
  EXPECT_NE(log.find("[ddprun] rank " + std::to_string(victim) + " (node 0, local rank " + std::to_string(victim) +
                     ", pid " + pid + ") is stopped (SIGSTOP or a debugger)"),
            std::string::npos)
      << log;
  EXPECT_TRUE(processes_with_env(job.tag).empty()) << processes_with_env(job.tag).size() << " job processes alive";
}

TEST(LauncherStuckPeerTest, DdprunEndsTheJobWhenRankOneIsStopped) { expect_ddprun_ends_the_job(1); }
TEST(LauncherStuckPeerTest, DdprunEndsTheJobWhenTheStoreHostRankZeroIsStopped) { expect_ddprun_ends_the_job(0); }

}  // namespace
}  // namespace ddp::test
