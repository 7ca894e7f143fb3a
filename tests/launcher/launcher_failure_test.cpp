// ddprun failures: a failing or killed worker stops the job, signals are forwarded, restarts, nothing survives.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

// Every worker writes its pid (and its background child's pid) to DIR/pid_*, then runs `body`. Each file
// appears whole (written aside, then renamed): a worker stopped mid-write leaves no empty pid file behind.
std::string worker_script(const TempDir& dir, const std::string& body) {
  const std::string d = dir.path();
  return write_script(dir, "worker.sh",
                      "record() { echo $2 > " + d + "/.tmp_$1 && mv " + d + "/.tmp_$1 " + d + "/$1; }\n"
                      "record pid_${RANK}_$TORCHELASTIC_RESTART_COUNT $$\n"
                      "sleep 60 & record pid_child_${RANK}_$TORCHELASTIC_RESTART_COUNT $!\n" +
                      body);
}

// The job's processes are found by a tag in their environment, and by the pids they wrote.
struct Job {
  TempDir dir;
  std::string tag = "DDPRUN_TEST_TAG=" + dir.path();
  std::string run(const std::string& flags, const std::string& script) const {
    return tag + " " + ddprun_path() + " " + flags + " " + script;
  }
  void expect_nothing_survives() const {
    const auto pids = pids_in_files(dir, "pid_");
    EXPECT_FALSE(pids.empty());
    EXPECT_TRUE(alive(pids).empty()) << alive(pids).size() << " of " << pids.size() << " worker pids alive";
    EXPECT_TRUE(processes_with_env(tag).empty()) << processes_with_env(tag).size() << " job processes alive";
  }
};

TEST(LauncherFailureTest, WorkerExitCodeStopsTheOthers) {
  Job job;
  const std::string script = worker_script(job.dir,
                                           "if [ $RANK = 1 ]; then sleep 0.5; echo 'rank one gives up' >&2; exit 3; fi\n"
                                           "wait\n");
  auto r = run_timed(job.run("--nproc-per-node=3", script));
  EXPECT_NE(r.result.exit_code, 0) << r.result.output;
  EXPECT_LT(r.seconds, 5.0) << r.result.output;
  EXPECT_NE(r.result.output.find("rank 1 (node 0, local rank 1, pid "), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("exited with code 3"), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("[ddprun]   | rank one gives up"), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("error: the job failed"), std::string::npos) << r.result.output;
  job.expect_nothing_survives();
}

// A rank that never joins is the one ddprun's error line names (not rank 0, which times out waiting for it and
// reports it): the failing worker's own error line ends ddprun's.
TEST(LauncherFailureTest, ARankThatNeverJoinsIsNamedInDdprunsErrorLine) {
  Job job;
  const std::string cfg = write_tiny_job(job.dir, 64, 16, 1, {"dist.timeout_s=3.0", "metrics.progress=off"});
  const std::string script = write_script(job.dir, "late.sh",
                                          "[ \"$RANK\" = 1 ] && sleep 20\nexec " + ddptrain_path() + " " + cfg + "\n");
  auto r = run_timed(job.run("--standalone --nproc-per-node=2 --grace-period=1", script));
  EXPECT_EQ(r.result.exit_code, 1) << r.result.output;
  EXPECT_LT(r.seconds, 15.0) << r.result.output;
  const auto at = r.result.output.find("[ddprun] error: the job failed: ");
  ASSERT_NE(at, std::string::npos) << r.result.output;
  const std::string line = r.result.output.substr(at, r.result.output.find('\n', at) - at);
  EXPECT_NE(line.find("rank 0 (node 0, local rank 0, pid "), std::string::npos) << line;
  EXPECT_NE(line.find("exited with code 1: rank 0: timed out after 3 s waiting for rank(s) 1 of 2 to join"),
            std::string::npos)
      << line;
}

// A job secret of the wrong length is a usage error before any worker starts.
TEST(LauncherFailureTest, JobSecretOfTheWrongLengthIsAUsageError) {
  Job job;
  auto r = run_timed("DDPTRAIN_JOB_SECRET=short " + job.run("--standalone --nproc-per-node=1", "true"));
  EXPECT_EQ(r.result.exit_code, 2) << r.result.output;
  EXPECT_NE(r.result.output.find("DDPTRAIN_JOB_SECRET has 5 characters; give 16 to 1024"), std::string::npos)
      << r.result.output;
}

TEST(LauncherFailureTest, WorkerKilledBySignalIsNamed) {
  Job job;
  const std::string script = worker_script(job.dir, "if [ $RANK = 0 ]; then sleep 0.5; kill -KILL $$; fi\nwait\n");
  auto r = run_timed(job.run("--nproc-per-node=2", script));
  EXPECT_NE(r.result.exit_code, 0) << r.result.output;
  EXPECT_LT(r.seconds, 5.0) << r.result.output;
  EXPECT_NE(r.result.output.find("rank 0 (node 0, local rank 0, pid "), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("was killed by signal SIGKILL (9)"), std::string::npos) << r.result.output;
  job.expect_nothing_survives();
}

// ddprun of two workers running `script`, sent `signal` once both are running; its output ends "ddprun exit CODE".
TimedResult signal_ddprun(const Job& job, const std::string& script, const std::string& signal,
                          const std::string& flags = "") {
  const std::string wait_started = "for i in $(seq 200); do [ -f " + job.dir / "pid_1_0" + " ] && [ -f " +
                                   job.dir / "pid_0_0" + " ] && break; sleep 0.05; done; sleep 0.2\n";
  // Job control on (set -m): otherwise bash starts background commands with SIGINT ignored.
  return run_timed("set -m\n" + job.run("--nproc-per-node=2" + flags, script) + " &\nP=$!\n" + wait_started + "kill -" +
                   signal + " $P\nwait $P\necho \"ddprun exit $?\"\n");
}

// Each worker records the signal it gets, then exits; ddprun is signalled once both are running.
void expect_signal_forwarded(const std::string& signal, int expected_exit, const std::string& flags = "") {
  Job job;
  const std::string script = worker_script(
      job.dir, "trap 'echo " + signal + " > " + job.dir.path() + "/got_$RANK; exit 1' " + signal +
                   "\nwhile true; do sleep 0.05; done\n");
  auto r = signal_ddprun(job, script, signal, flags);
  EXPECT_NE(r.result.output.find("ddprun exit " + std::to_string(expected_exit)), std::string::npos)
      << r.result.output;
  EXPECT_LT(r.seconds, 8.0);
  for (int rank : {0, 1})
    EXPECT_EQ(read_file(job.dir / ("got_" + std::to_string(rank))), signal + "\n") << "rank " << rank;
  EXPECT_NE(r.result.output.find("received SIG" + signal), std::string::npos) << r.result.output;
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, SigtermToDdprunIsForwarded) { expect_signal_forwarded("TERM", 128 + 15); }
TEST(LauncherFailureTest, SigintToDdprunIsForwarded) { expect_signal_forwarded("INT", 128 + 2); }
TEST(LauncherFailureTest, SigquitToDdprunIsForwarded) { expect_signal_forwarded("QUIT", 128 + 3); }  // torchrun's list
TEST(LauncherFailureTest, SignalsToHandleAddsOneToForward) {
  expect_signal_forwarded("USR2", 128 + 12, " --signals-to-handle=SIGTERM,SIGUSR2");
}

// SIGUSR1 asks the workers to checkpoint and exit 75: one that fails instead (exits 3 while the other exits 75, or
// dies of the signal it does not handle) fails the job, exit 1 naming it, never 0 ("done") or 75 ("requeue me").
TEST(LauncherFailureTest, AWorkerThatFailsOnSigusr1FailsTheJob) {
  for (const std::string on_usr1 : {"trap 'if [ $RANK = 0 ]; then exit 75; fi; exit 3' USR1\n", ""}) {
    SCOPED_TRACE(on_usr1.empty() ? "no trap" : on_usr1);
    Job job;
    auto r = signal_ddprun(job, worker_script(job.dir, on_usr1 + "while true; do sleep 0.05; done\n"), "USR1");
    EXPECT_NE(r.result.output.find("ddprun exit 1\n"), std::string::npos) << r.result.output;
    EXPECT_NE(r.result.output.find("error: the job failed while its workers stopped for SIGUSR1: rank " +
                                   std::string(on_usr1.empty() ? "" : "1 (node 0, local rank 1, pid ")),
              std::string::npos)
        << r.result.output;
    EXPECT_LT(r.seconds, 8.0);
    job.expect_nothing_survives();
  }
}

// SIGTERM while the workers still checkpoint for SIGUSR1 (a time limit reached): they are killed at once and ddprun
// exits for the signal (128 + 15), not as if they had failed.
TEST(LauncherFailureTest, SigtermAfterSigusr1EndsTheJobForTheSignal) {
  Job job;
  auto r = signal_ddprun(job, worker_script(job.dir, "trap '' USR1 TERM\nwhile true; do sleep 0.05; done\n"),
                         "USR1 $P; sleep 0.5; kill -TERM");
  EXPECT_NE(r.result.output.find("ddprun exit 143\n"), std::string::npos) << r.result.output;
  EXPECT_EQ(r.result.output.find("error:"), std::string::npos) << r.result.output;
  EXPECT_LT(r.seconds, 8.0);
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, WorkerIgnoringSigtermGetsSigkillAfterGracePeriod) {
  Job job;
  const std::string script = worker_script(
      job.dir, "trap '' TERM\nif [ $RANK = 1 ]; then sleep 0.3; exit 4; fi\nwhile true; do sleep 0.05; done\n");
  auto r = run_timed(job.run("--nproc-per-node=2 --grace-period=1", script));
  EXPECT_NE(r.result.exit_code, 0) << r.result.output;
  EXPECT_GE(r.seconds, 1.0) << r.result.output;
  EXPECT_LT(r.seconds, 6.0) << r.result.output;
  EXPECT_NE(r.result.output.find("sending SIGKILL"), std::string::npos) << r.result.output;
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, MaxRestartsRestartsEveryWorkerWithTheNextCount) {
  Job job;
  const std::string script = worker_script(
      job.dir, "echo \"rank $RANK attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS\"\n"
               "kill %1\n"
               "if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 3; fi\n"
               "sleep 0.5\n");
  auto r = run_timed(job.run("--nproc-per-node=2 --max-restarts 1 --log-dir " + job.dir / "logs", script));
  EXPECT_EQ(r.result.exit_code, 0) << r.result.output;
  EXPECT_NE(r.result.output.find("restart 1 of --max-restarts 1 (TORCHELASTIC_RESTART_COUNT=1)"),
            std::string::npos)
      << r.result.output;
  EXPECT_NE(r.result.output.find("rank 0 attempt 1 of 1"), std::string::npos) << r.result.output;
  EXPECT_NE(r.result.output.find("[rank 1] rank 1 attempt 1 of 1"), std::string::npos) << r.result.output;
  EXPECT_NE(read_file(job.dir / "logs/attempt_0/rank_1.log").find("rank 1 attempt 0"), std::string::npos);
  EXPECT_NE(read_file(job.dir / "logs/attempt_1/rank_1.log").find("rank 1 attempt 1"), std::string::npos);
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, ExceedingMaxRestartsFails) {
  Job job;
  const std::string script = worker_script(job.dir, "kill %1\n[ $RANK = 1 ] && exit 5\nsleep 0.2\n");
  auto r = run_timed(job.run("--nproc-per-node=2 --max-restarts=2", script));
  EXPECT_NE(r.result.exit_code, 0) << r.result.output;
  EXPECT_NE(r.result.output.find("no restarts left (--max-restarts 2 used up)"), std::string::npos)
      << r.result.output;
  EXPECT_EQ(pids_in_files(job.dir, "pid_1_").size(), 3u);  // the first start and two restarts
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, FailureOnOneNodeStopsTheOtherNode) {
  Job job;
  const std::string script = worker_script(
      job.dir, "if [ $RANK = 3 ]; then sleep 0.5; echo 'node one breaks' >&2; exit 3; fi\nwait\n");
  const std::string port = std::to_string(free_port_pair());
  auto node = [&](int n) {
    return job.run("--nnodes=2 --node_rank=" + std::to_string(n) + " --nproc_per_node=2 --master_addr=127.0.0.1 "
                   "--master_port=" + port, script);
  };
  auto r = run_two_nodes(job.dir, node(0), node(1));
  EXPECT_NE(r.node0.exit_code, 0) << r.node0.output;
  EXPECT_NE(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_LT(r.seconds, 8.0);
  EXPECT_NE(r.node1.output.find("rank 3 (node 1, local rank 1, pid "), std::string::npos) << r.node1.output;
  EXPECT_NE(r.node1.output.find("node one breaks"), std::string::npos) << r.node1.output;
  EXPECT_NE(r.node0.output.find("another node failed (rank 3 (node 1"), std::string::npos) << r.node0.output;
  EXPECT_NE(r.node0.output.find("exited with code 3"), std::string::npos) << r.node0.output;
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, FailureOnOneNodeRestartsBothNodes) {
  Job job;
  const std::string script = worker_script(
      job.dir, "echo \"rank $RANK attempt $TORCHELASTIC_RESTART_COUNT\"\n"
               "if [ $TORCHELASTIC_RESTART_COUNT = 1 ]; then kill %1; exit 0; fi\n"
               "if [ $RANK = 2 ]; then sleep 0.5; exit 3; fi\nwait\n");
  const std::string port = std::to_string(free_port_pair());
  auto node = [&](int n) {
    return job.run("--nnodes 2 --node-rank " + std::to_string(n) + " --nproc-per-node 2 --master-port " + port +
                   " --max-restarts 1", script);
  };
  auto r = run_two_nodes(job.dir, node(0), node(1));
  EXPECT_EQ(r.node0.exit_code, 0) << r.node0.output;
  EXPECT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.node0.output.find("rank 0 attempt 1"), std::string::npos) << r.node0.output;
  EXPECT_NE(r.node0.output.find("[rank 1] rank 1 attempt 1"), std::string::npos) << r.node0.output;
  EXPECT_NE(r.node1.output.find("[rank 2] rank 2 attempt 1"), std::string::npos) << r.node1.output;
  EXPECT_NE(r.node1.output.find("[rank 3] rank 3 attempt 1"), std::string::npos) << r.node1.output;
  job.expect_nothing_survives();
}

TEST(LauncherFailureTest, NodesWithDifferentFlagsRefuseToStart) {
  Job job;
  const std::string script = worker_script(job.dir, "kill %1\n");
  const std::string port = std::to_string(free_port_pair());
  auto node = [&](int n, int max_restarts) {
    return job.run("--nnodes=2 --node-rank=" + std::to_string(n) + " --nproc-per-node=2 --max-restarts=" +
                       std::to_string(max_restarts) + " --master-port=" + port,
                   script);
  };
  auto r = run_two_nodes(job.dir, node(0, 0), node(1, 1));
  EXPECT_NE(r.node0.exit_code, 0) << r.node0.output;
  EXPECT_EQ(r.node1.exit_code, 2) << r.node1.output;
  EXPECT_NE(r.node1.output.find("node 1 was started with --nnodes=2 --max-restarts=1"), std::string::npos)
      << r.node1.output;
  EXPECT_TRUE(processes_with_env(job.tag).empty());
}

}  // namespace
}  // namespace ddp::test
