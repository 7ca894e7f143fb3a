// SlurmCluster.*: docs/distributed.md's Slurm scripts, read from the page, run on a real two-node Slurm cluster.
//
// The cluster (tests/support/slurm_cluster.sh): munged, slurmctld and a slurmd per node, Debian's slurm-wlm 22.05,
// each node a network namespace of its own with its own hostname (node1, node2). Needs root and Debian's slurmctld,
// slurmd and munge (scripts/setup installs them). Without them the tests skip saying so, and fail when
// DDP_REQUIRE_ORACLES=1 (scripts/test) so that they cannot pass by skipping.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>

namespace ddp::test {
namespace {

// Why a Slurm cluster cannot be started here ("" when it can); a failure where the oracles are required.
std::string slurm_cluster_missing() {
  std::string why;
  if (geteuid() != 0) why = "a Slurm cluster in network namespaces needs root (uid " + std::to_string(geteuid()) + ")";
  const auto missing = run_command(
      "for p in slurmctld slurmd munged sbatch srun scontrol ip nsenter unshare taskset; do command -v $p > /dev/null "
      "|| printf '%s ' $p; done");
  if (why.empty() && !missing.output.empty())
    why = "programs the Slurm cluster needs are missing (apt-get install slurmctld slurmd munge slurm-client): " +
          missing.output;
  const char* required = std::getenv("DDP_REQUIRE_ORACLES");
  if (!why.empty() && required && std::string(required) == "1") ADD_FAILURE() << why << " (DDP_REQUIRE_ORACLES=1)";
  return why;
}

// A two-node Slurm cluster under a temp dir, stopped (daemons ended, namespaces removed) by the destructor.
class TwoNodeSlurm {
 public:
  TwoNodeSlurm() : script_(source_dir() + "/tests/support/slurm_cluster.sh") {}
  ~TwoNodeSlurm() { run_command("bash " + shell_quote(script_) + " stop " + shell_quote(dir_.path())); }
  TwoNodeSlurm(const TwoNodeSlurm&) = delete;
  TwoNodeSlurm& operator=(const TwoNodeSlurm&) = delete;

  // Starts the daemons and waits until both nodes are idle; the failure's output (daemons' logs) if not.
  CommandResult start() {
    return run_command("bash " + shell_quote(script_) + " start " + shell_quote(dir_.path()) + " " +
                       std::to_string(free_port()) + " " + std::to_string(free_port()));
  }
  // Runs a bash command line on node1, the login node, as a user there would: SLURM_CONF set, no other SLURM_*
  // variable inherited from a job this test may run in.
  CommandResult on_login_node(const std::string& command) const {
    return run_command("bash " + shell_quote(script_) + " exec " + shell_quote(dir_.path()) + " 1 bash -c " +
                       shell_quote("unset $(compgen -e | grep '^SLURM_' | grep -vx SLURM_CONF); " + command) +
                       " < /dev/null");
  }

 private:
  TempDir dir_;
  std::string script_;
};

// The shell block of docs/distributed.md that holds `marker`, the repository's build/ddptrain and build/ddprun made
// this build's binaries and its configs/*.toml made `config`.
std::string docs_slurm_script(const std::string& marker, const std::string& config) {
  const std::string docs = read_file(source_dir() + "/docs/distributed.md");
  const size_t at = docs.find(marker);
  const size_t open = docs.rfind("```sh\n", at);
  const size_t close = docs.find("```", at);
  if (at == std::string::npos || open == std::string::npos || close == std::string::npos)
    throw std::runtime_error("docs/distributed.md has no ```sh block holding " + marker);
  const std::string block = docs.substr(open + 6, close - open - 6);
  const std::regex repo_path(R"(build/(ddptrain|ddprun)\b|configs/[a-z0-9_]+\.toml)");
  std::string script;
  size_t done = 0;
  for (auto it = std::sregex_iterator(block.begin(), block.end(), repo_path); it != std::sregex_iterator(); ++it) {
    script += block.substr(done, static_cast<size_t>(it->position()) - done);
    script += (*it)[1].matched ? shell_quote(binary_dir() + "/" + (*it)[1].str()) : shell_quote(config);
    done = static_cast<size_t>(it->position() + it->length());
  }
  return script + block.substr(done);
}

// The value of `field` (JobState, Restarts, ExitCode) in `scontrol show job` text.
std::string slurm_job_field(const std::string& shown, const std::string& field) {
  std::smatch m;
  if (!std::regex_search(shown, m, std::regex("\\b" + field + "=(\\S+)"))) return "";
  return m[1].str();
}

// Trains `world` ranks given torchrun's variables on `cfg` into dir/torchrun and expects their model.pt in `model`,
// byte for byte.
void expect_model_of_torchrun_ranks(int world, const std::string& cfg, const TempDir& dir, const std::string& model) {
  for (const RankResult& r : run_ranks(world, cfg + " --job.out_dir=" + dir / "torchrun"))
    ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string reference = dir / "torchrun/model.pt";
  const std::string a = read_file(model), b = read_file(reference);
  EXPECT_TRUE(!a.empty() && a == b) << model << " and the model.pt of " << world
                                    << " ranks given torchrun's variables differ (max |a - b| = "
                                    << max_state_diff(model, reference) << ")";
}

#define START_TWO_NODE_SLURM(cluster)                                                                      \
  do {                                                                                                     \
    if (const std::string why_not_ = slurm_cluster_missing(); !why_not_.empty()) GTEST_SKIP() << why_not_; \
    const CommandResult started_ = (cluster).start();                                                      \
    ASSERT_EQ(started_.exit_code, 0) << started_.output;                                                   \
  } while (0)

// "Running under Slurm": srun starts ddptrain itself on both nodes; the ranks meet at the node list's first host on
// the job id's port, with no MASTER_ADDR, all-reduce over Gloo between the nodes and train the model.pt of a run given
// torchrun's variables.
TEST(SlurmCluster, SrunTasksMeetAtTheNodeListsFirstHostAndTrainTheTorchrunModel) {
  TwoNodeSlurm cluster;
  START_TWO_NODE_SLURM(cluster);
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 128, 32, 1,
                                         {"job.out_dir=" + dir / "srun", "data.batch_size=4", "model.name=net",
                                          "training.max_steps=4", "dist.timeout_s=60", "dist.allreduce=gloo"});
  const std::string line = docs_slurm_script("srun --ntasks-per-node=4 build/ddptrain", cfg);
  ASSERT_NE(line.find(shell_quote(ddptrain_path())), std::string::npos) << line;
  // The allocation the line runs in: both nodes, as many tasks a node as the line asks for.
  const CommandResult srun = cluster.on_login_node("cd " + shell_quote(dir.path()) +
                                                   " && OMP_NUM_THREADS=1 salloc --nodes=2 --ntasks-per-node=4 "
                                                   "bash -c " +
                                                   shell_quote(line));
  ASSERT_EQ(srun.exit_code, 0) << srun.output;
  std::smatch job;
  ASSERT_TRUE(std::regex_search(srun.output, job, std::regex("Granted job allocation ([0-9]+)"))) << srun.output;
  // PyTorch Lightning's SLURMEnvironment.main_port: the job id's last 4 digits + 15000.
  const int port = 15000 + std::stoi(job[1].str()) % 10000;
  EXPECT_NE(srun.output.find("world 8 |"), std::string::npos) << srun.output;
  EXPECT_NE(srun.output.find("\n  rendezvous node1:" + std::to_string(port) +
                             " (first host of SLURM_STEP_NODELIST, port from SLURM_JOB_ID)\n"),
            std::string::npos)
      << srun.output;

  expect_model_of_torchrun_ranks(8, cfg, dir, dir / "srun/model.pt");
}

// The elastic lines of "Launching with ddprun" in a two-node batch job: one ddprun a node meets at the first node's
// c10d endpoint, the round spans both nodes, and the job, all-reducing over Gloo between them, trains the model.pt of
// a run given torchrun's variables.
TEST(SlurmCluster, ElasticBatchLinesFormOneRoundOfBothNodesAndTrainTheTorchrunModel) {
  TwoNodeSlurm cluster;
  START_TWO_NODE_SLURM(cluster);
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 128, 32, 1,
                                         {"job.out_dir=" + dir / "elastic", "data.batch_size=4", "model.name=net",
                                          "training.max_steps=4", "dist.allreduce=gloo"});
  write_file(dir / "job.sh", "#!/bin/bash\n" + docs_slurm_script("--rdzv-backend=c10d --rdzv-endpoint=$head", cfg));
  const CommandResult job = cluster.on_login_node(
      "cd " + shell_quote(dir.path()) +
      " && sbatch --wait --nodes=2 --ntasks-per-node=1 --output=" + shell_quote(dir / "job.out") + " job.sh");
  const std::string out = read_file(dir / "job.out");
  ASSERT_EQ(job.exit_code, 0) << job.output << out;
  EXPECT_NE(out.find("] rendezvous round 0: node 0 of 2: ranks 0..1 of 4,"), std::string::npos) << out;
  EXPECT_NE(out.find("] rendezvous round 0: node 1 of 2: ranks 2..3 of 4,"), std::string::npos) << out;

  expect_model_of_torchrun_ranks(4, cfg, dir, dir / "elastic/model.pt");
}

// "Before the time limit": the #SBATCH --signal=USR1@90 --requeue script. Slurm's SIGUSR1 to the job's steps (as
// scancel --signal=USR1 sends it, the way --signal sends it before the limit) makes both nodes' ddprun checkpoint
// and exit 75; the script requeues the job, Slurm starts it again, and it resumes to the uninterrupted run's
// model.pt, all-reducing over Gloo between the nodes before and after the requeue.
TEST(SlurmCluster, SbatchScriptStoppedBySigusr1IsRequeuedAndResumesToTheUninterruptedModel) {
  TwoNodeSlurm cluster;
  START_TWO_NODE_SLURM(cluster);
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 2048, 32, 1,
                     {"job.out_dir=" + dir / "job", "data.batch_size=4", "model.name=net", "training.max_steps=300",
                      "checkpoint.resume=auto", "metrics.log_every_steps=1", "metrics.progress=plain",
                      "dist.timeout_s=60", "dist.allreduce=gloo"});
  write_file(dir / "job.sh", docs_slurm_script("#SBATCH --nodes=2", cfg));
  const CommandResult submitted = cluster.on_login_node(
      "cd " + shell_quote(dir.path()) + " && sbatch --parsable --output=" + shell_quote(dir / "job.out") +
      " --open-mode=append job.sh");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job_id = std::to_string(std::stoi(submitted.output));
  const std::string show_job = "scontrol show job " + job_id;

  // SIGUSR1 once the workers train: two steps in rank 0's metrics.jsonl.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (run_command("cat " + shell_quote(dir / "job/metrics.jsonl") + " 2> /dev/null").output.find("\"step\":2,") ==
         std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << read_file(dir / "job.out");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const CommandResult signalled = cluster.on_login_node("scancel --signal=USR1 " + job_id);
  ASSERT_EQ(signalled.exit_code, 0) << signalled.output;

  // Requeued (Slurm holds a requeued job until its credentials expire: AuthInfo cred_expire), then run to the end.
  std::string shown;
  do {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline + std::chrono::seconds(30))
        << shown << read_file(dir / "job.out");
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    shown = cluster.on_login_node(show_job).output;
  } while (std::regex_search(shown, std::regex("JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED)")));
  const std::string out = read_file(dir / "job.out");
  EXPECT_EQ(slurm_job_field(shown, "JobState"), "COMPLETED") << shown << out;
  EXPECT_EQ(slurm_job_field(shown, "Restarts"), "1") << shown << out;
  EXPECT_EQ(slurm_job_field(shown, "ExitCode"), "0:0") << shown << out;
  EXPECT_NE(out.find("srun: error: node2: task 1: Exited with exit code 75"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped for requeue (SIGUSR1: a time limit ahead)"), std::string::npos) << out;
  EXPECT_NE(out.find("\nresumed from "), std::string::npos) << out;

  expect_model_of_torchrun_ranks(4, cfg, dir, dir / "job/model.pt");
}

}  // namespace
}  // namespace ddp::test
