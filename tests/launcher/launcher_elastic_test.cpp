// ddprun's c10d rendezvous on one machine: identical command lines, node ranks agreed at the endpoint, a lost node
// (its ddprun and workers killed) survived at the smaller world size, a node joining a running job, a job below MIN.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <regex>
#include <set>

namespace ddp::test {
namespace {

// The same ddprun command line for every node, meeting at host:port.
std::string elastic_command(const std::string& host, int port, const std::string& nnodes, const std::string& extra) {
  return "env DDPTRAIN_JOB_SECRET=" + std::string(64, 'e') + " OMP_NUM_THREADS=1 " + ddprun_path() +
         " --rdzv-backend=c10d --rdzv-endpoint=" + host + ":" + std::to_string(port) +
         " --rdzv-id=elastic-test --nnodes=" + nnodes + " --nproc-per-node=1 --grace-period=3 " +
         "--rdzv-conf=last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3 " + extra;
}

// Shell lines that start node i in the background (output in dir/node<i>.out, exit code in dir/node<i>.rc) and keep
// its ddprun's pid in $node<i>.
std::string start_node(const TempDir& dir, int i, const std::string& command) {
  const std::string n = std::to_string(i);
  const std::string pid_file = dir / ("node" + n + ".pid");
  return "(" + command + " > " + dir / ("node" + n + ".out") + " 2>&1 & echo $! > " + pid_file +
         "; wait $!; echo $? > " + dir / ("node" + n + ".rc") + ") &\nwhile [ ! -s " + pid_file +
         " ]; do sleep 0.01; done; node" + n + "=$(cat " + pid_file + ")\n";
}

// Shell lines that wait (up to 60 s) until `file` has a line matching the grep pattern.
std::string wait_for(const std::string& file, const std::string& pattern) {
  return "for i in $(seq 1200); do grep -q " + shell_quote(pattern) + " " + file + " 2>/dev/null && break; " +
         "sleep 0.05; done\n";
}

// Shell lines that wait (up to 60 s) until the step-5 checkpoint's manifest is in out/checkpoints: the background save
// is serialised at idle priority, and 3 ranks on fewer cores leave it little time before the next checkpoint.
std::string wait_for_checkpoint_of_step_5(const std::string& out) {
  return "for i in $(seq 1200); do [ -e " + shell_quote(out + "/checkpoints/step-00000005.json") +
         " ] && break; sleep 0.05; done\n";
}

// Shell lines that send `signal` to a node that does not serve the rendezvous (its ddprun and its workers), write the
// node's number to dir/victim and keep its ddprun's pid in $pid.
std::string signal_a_node_not_serving(const TempDir& dir, const std::string& signal) {
  return "victim=\nfor i in 0 1 2; do grep -q 'serves it' " + dir.path() + "/node$i.out || victim=$i; done\n" +
         "eval pid=\\$node$victim; kill " + signal + " $pid $(pgrep -P $pid); echo $victim > " + dir / "victim" + "\n";
}

CommandResult node_result(const TempDir& dir, int i) {
  const std::string n = std::to_string(i);
  const std::string rc = read_file(dir / ("node" + n + ".rc"));
  return {rc.empty() ? -1 : std::stoi(rc), read_file(dir / ("node" + n + ".out"))};
}

// Every node's output, for a failure message.
std::string node_logs(const TempDir& dir, int nodes = 3) {
  std::string logs;
  for (int i = 0; i < nodes; ++i) logs += "--- node " + std::to_string(i) + ":\n" + node_result(dir, i).output;
  return logs;
}

std::string tiny_elastic_job(const TempDir& dir) {
  return write_tiny_job(
      dir, 960, 32, 11,
      {"job.seed=4", "data.batch_size=16", "model.name=net", "optimizer.lr=0.05", "optimizer.momentum=0.9",
       "training.epochs=2", "checkpoint.every_steps=5", "checkpoint.keep_last=100", "metrics.log_every_steps=1",
       "metrics.progress=plain", "metrics.sample_ids=true", "dist.timeout_s=20.0"});
}

// The samples in the final weights, per epoch: from out_dir/samples/rank-*.jsonl, the lines of world `before_world`
// up to step `resumed_at` and every line of world `after_world` (the steps after the resume). Fails the test when a
// sample of an epoch is there twice or a step is missing.
std::map<int64_t, std::vector<int64_t>> samples_in_weights(const std::string& out_dir, int64_t before_world,
                                                           int64_t resumed_at, int64_t after_world) {
  std::map<int64_t, std::vector<int64_t>> by_epoch;
  std::set<std::pair<int64_t, int64_t>> steps_ranks;
  const std::regex line_re(R"(\{"step":(\d+),"epoch":(\d+),"rank":(\d+),"world_size":(\d+),"samples":\[([0-9,]*)\]\})");
  for (const auto& file : std::filesystem::directory_iterator(out_dir + "/samples")) {
    for (const auto& line : read_lines(file.path().string())) {
      std::smatch m;
      if (!std::regex_match(line, m, line_re)) {
        ADD_FAILURE() << "unreadable sample line: " << line;
        continue;
      }
      const int64_t step = std::stoll(m[1]), world = std::stoll(m[4]);
      if (!((world == before_world && step <= resumed_at) || (world == after_world && step > resumed_at))) continue;
      EXPECT_TRUE(steps_ranks.insert({step, std::stoll(m[3])}).second) << "step " << step << " twice: " << line;
      std::stringstream ids(m[5].str());
      for (std::string id; std::getline(ids, id, ',');) by_epoch[std::stoll(m[2])].push_back(std::stoll(id));
    }
  }
  return by_epoch;
}

// After 3 nodes of `--nnodes 2:3` lost node `victim` mid-epoch: the others ended on 2 nodes, with the model a plain
// world of 2 trains from the same checkpoint, the summary's world sizes, and each sample of each epoch once.
void expect_the_job_ended_on_two_nodes(const TempDir& dir, const std::string& cfg, const std::string& out, int victim) {
  const std::string logs = node_logs(dir);
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    const auto r = node_result(dir, i);
    EXPECT_EQ(r.exit_code, 0) << logs;
    EXPECT_NE(r.output.find("rendezvous round 0: node"), std::string::npos) << logs;
    EXPECT_NE(r.output.find(" of 3: rank"), std::string::npos) << logs;
    EXPECT_NE(r.output.find(" of 2: rank"), std::string::npos) << logs;  // the next round: two nodes
    EXPECT_NE(r.output.find("restart 1 of --max-restarts 1"), std::string::npos) << logs;
  }
  ASSERT_TRUE(std::filesystem::exists(out + "/model.pt")) << logs;
  // The world of 2 resumed from the newest checkpoint of the world of 3; the same checkpoint resumed by a plain
  // world of 2 (no failure, no rendezvous) trains to the same bits.
  std::smatch m;
  const std::regex resumed("resumed from (\\S+) at step (\\d+)");
  ASSERT_TRUE(std::regex_search(logs, m, resumed)) << logs;
  const int resumed_at = std::stoi(m[2]);
  EXPECT_GE(resumed_at, 5) << logs;
  const std::string checkpoint = dir / "from.pt";
  std::filesystem::copy_file(m[1].str(), checkpoint);
  // (The elastic run wrote later checkpoints into the same folder; the copy was taken from the path it named, which
  // it never rewrote: a checkpoint file is written once.)
  const auto ref =
      run_command("env OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node=2 " + ddptrain_path() +
                  " " + cfg + " --job.out_dir=" + dir / "reference" + " --checkpoint.resume=" + checkpoint + " 2>&1");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  EXPECT_EQ(read_file(out + "/model.pt"), read_file(dir / "reference/model.pt")) << logs << ref.output;
  // The summary says which steps ran at which world size: the rest of epoch 1 and epoch 2 at 2 x 16 a step.
  EXPECT_NE(logs.find("world sizes            steps 1-" + std::to_string(resumed_at) + ": 3 ranks, " +
                      std::to_string(resumed_at + 1) + "-" +
                      std::to_string(resumed_at + (960 - 48 * resumed_at + 31) / 32 + 30) + ": 2 ranks"),
            std::string::npos)
      << logs;
  // Every sample of every epoch trained exactly once in the final weights: the world of 3's steps up to the
  // checkpoint, then the world of 2's (the steps between the checkpoint and the kill were rolled back).
  const auto by_epoch = samples_in_weights(out, 3, resumed_at, 2);
  ASSERT_EQ(by_epoch.size(), 2u);
  for (auto [epoch, ids] : by_epoch) {
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> all(960);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(ids, all) << "epoch " << epoch;
  }
}

TEST(LauncherElasticTest, LostNodeIsSurvivedAtTheSmallerWorldFromTheNewestCheckpoint) {
  TempDir dir;
  const std::string cfg = tiny_elastic_job(dir);
  const std::string out = dir / "elastic";
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "2:3", "--max-restarts=1") + " -- " +
                          ddptrain_path() + " " + cfg + " --job.out_dir=" + out;
  std::string script;
  for (int i = 0; i < 3; ++i) script += start_node(dir, i, cmd);
  // At step 8 of the world of 3, once the checkpoint of step 5 is written, kill -9 a node that does not serve the
  // rendezvous: its ddprun and its worker, as a machine that lost power.
  script += wait_for(out + "/metrics.jsonl", "\"step\":8,") + wait_for_checkpoint_of_step_5(out);
  script += signal_a_node_not_serving(dir, "-9") + "wait\n";
  run_command(script);
  expect_the_job_ended_on_two_nodes(dir, cfg, out, std::stoi(read_file(dir / "victim")));
}

// The same across three network namespaces joined by a bridge, each node's ddprun and worker in its own, Gloo over
// the links: the endpoint on node 0, one identical ddprun command line, node 2's namespace emptied by kill -9.
TEST(LauncherElasticTest, LostNodeInThreeNetworkNamespacesIsSurvived) {
  NodeNamespaces net(3);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = tiny_elastic_job(dir);
  const std::string out = dir / "elastic";
  const std::string cmd = elastic_command(NodeNamespaces::address(0), 29400, "2:3", "--max-restarts=1") + " -- " +
                          ddptrain_path() + " " + cfg + " --job.out_dir=" + out + " --dist.allreduce=gloo";
  std::string script;
  for (int i = 0; i < 3; ++i) script += start_node(dir, i, net.exec(i) + "env GLOO_SOCKET_IFNAME=veth0 " + cmd);
  script += wait_for(out + "/metrics.jsonl", "\"step\":8,") + wait_for_checkpoint_of_step_5(out);
  script += net.kill_all(2) + "\nwait\n";
  run_command(script);
  EXPECT_NE(node_result(dir, 0).output.find("(this ddprun serves it)"), std::string::npos) << node_logs(dir);
  expect_the_job_ended_on_two_nodes(dir, cfg, out, 2);
  EXPECT_EQ(net.pids(0), "");
  EXPECT_EQ(net.pids(1), "");
}

// A node that arrives while a 2-node job runs (MAX 3) is taken in: the workers checkpoint at the next step (SIGUSR1)
// and restart on 3 nodes from it; not a failure (--max-restarts 0 suffices).
TEST(LauncherElasticTest, NodeJoiningARunningJobIsTakenInAtTheNextCheckpointWithoutARestart) {
  TempDir dir;
  const std::string cfg = tiny_elastic_job(dir);
  const std::string out = dir / "grown";
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "2:3", "--max-restarts=0") + " -- " +
                          ddptrain_path() + " " + cfg + " --job.out_dir=" + out + " --training.epochs=30";
  const auto run = run_command(start_node(dir, 0, cmd) + start_node(dir, 1, cmd) +
                               wait_for(out + "/metrics.jsonl", "\"step\":5,") + start_node(dir, 2, cmd) + "wait\n");
  const std::string logs = node_logs(dir);
  for (int i = 0; i < 3; ++i) {
    const auto r = node_result(dir, i);
    EXPECT_EQ(r.exit_code, 0) << logs;
    EXPECT_NE(r.output.find(" of 3: rank"), std::string::npos) << logs;
    EXPECT_EQ(r.output.find("restart 1"), std::string::npos) << logs;
    if (i < 2) {
      EXPECT_NE(r.output.find("rendezvous round 0: node"), std::string::npos) << logs;
      EXPECT_NE(r.output.find("1 node(s) waiting to join the 2 running"), std::string::npos) << logs;
    }
  }
  EXPECT_NE(logs.find("stopped for requeue"), std::string::npos) << logs;  // the checkpoint at the step boundary
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex("world sizes +steps 1-(\\d+): 2 ranks, \\d+-(\\d+): 3 ranks")))
      << logs;
  // The samples of the epoch the job grew in: each once (the world of 2 up to its checkpoint, then the world of 3).
  const auto by_epoch = samples_in_weights(out, 2, std::stoi(m[1]), 3);
  EXPECT_EQ(by_epoch.size(), 30u) << logs;
  for (auto [epoch, ids] : by_epoch) {
    std::sort(ids.begin(), ids.end());
    ASSERT_EQ(ids.size(), 960u) << "epoch " << epoch << "\n" << logs;
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "epoch " << epoch;
  }
}

// Fewer nodes than MIN: after join_timeout, one error line says how many joined, who, and how many are missing.
TEST(LauncherElasticTest, JobBelowMinWaitsJoinTimeoutAndSaysWhatIsMissing) {
  TempDir dir;
  const auto r =
      run_timed(elastic_command("127.0.0.1", free_port(), "2:3", "--rdzv-conf=join_timeout=2") + " -- /bin/true 2>&1");
  EXPECT_EQ(r.result.exit_code, 1) << r.result.output;
  EXPECT_GE(r.seconds, 2.0);
  EXPECT_LT(r.seconds, 20.0);
  EXPECT_TRUE(std::regex_search(
      r.result.output, std::regex("\\[ddprun\\] error: rendezvous 'elastic-test' at 127\\.0\\.0\\.1:\\d+: 1 of "
                                  "the 2 node\\(s\\) --nnodes 2:3 needs joined within 2 s \\(--rdzv-conf "
                                  "join_timeout\\): 127\\.0\\.0\\.1 \\(pid \\d+\\); 1 missing\n")))
      << r.result.output;
}

// A node whose workers finished waits for the other node's (the exit barrier) still sending keep-alives: the other
// node, whose worker runs on for longer than keep_alive_interval x keep_alive_max_attempt (3 s), does not count it
// lost, and both exit 0.
TEST(LauncherElasticTest, ANodeThatFinishedFirstKeepsSendingKeepAlives) {
  TempDir dir;
  const std::string worker = write_script(dir, "worker.sh", "if [ $RANK = 0 ]; then sleep 5; fi\n");
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "2", "") + " -- " + worker;
  run_command(start_node(dir, 0, cmd) + start_node(dir, 1, cmd) + "wait\n");
  const std::string logs = node_logs(dir, 2);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(node_result(dir, i).exit_code, 0) << logs;
  EXPECT_EQ(logs.find("sent no keep-alive"), std::string::npos) << logs;
}

// With MAX nodes running, a further node waits; when the job finishes it leaves, exit 0, saying so.
TEST(LauncherElasticTest, NodeBeyondMaxWaitsAndLeavesWhenTheJobFinishes) {
  TempDir dir;
  const std::string worker = write_script(dir, "worker.sh", "echo \"rank $RANK of $WORLD_SIZE\"; sleep 2\n");
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "1:2", "") + " -- " + worker;
  run_command(start_node(dir, 0, cmd) + start_node(dir, 1, cmd) + "sleep 1\n" + start_node(dir, 2, cmd) + "wait\n");
  const std::string logs = node_logs(dir);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node_result(dir, i).exit_code, 0) << logs;
  EXPECT_NE(node_result(dir, 0).output.find(" of 2: rank"), std::string::npos) << logs;
  EXPECT_NE(node_result(dir, 1).output.find(" of 2: rank"), std::string::npos) << logs;
  EXPECT_NE(node_result(dir, 2).output.find("the job finished before this node could join it"), std::string::npos)
      << logs;
  EXPECT_EQ(node_result(dir, 2).output.find("rank 0 of"), std::string::npos) << logs;  // its worker never started
}

// A node that is not one of the job's leaves it running, as torchrun's agent does: one waiting beyond MAX that gets
// SIGTERM exits 143, one started with another --max-restarts is refused (exit 2); the job's two nodes finish, exit 0.
TEST(LauncherElasticTest, ANodeOutsideTheRunningJobCannotStopIt) {
  TempDir dir;
  const std::string worker = write_script(dir, "worker.sh", "echo \"rank $RANK of $WORLD_SIZE\"; sleep 4\n");
  const int port = free_port();
  const std::string cmd = elastic_command("127.0.0.1", port, "1:2", "") + " -- " + worker;
  const std::string other = elastic_command("127.0.0.1", port, "1:2", "--max-restarts=1") + " -- " + worker;
  run_command(start_node(dir, 0, cmd) + start_node(dir, 1, cmd) + wait_for(dir / "node0.out", " of 2: rank") +
              wait_for(dir / "node1.out", " of 2: rank") + start_node(dir, 2, cmd) + "sleep 1\nkill -TERM $node2\n" +
              start_node(dir, 3, other) + "wait\n");
  const std::string logs = node_logs(dir, 4);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(node_result(dir, i).exit_code, 0) << logs;
  EXPECT_EQ(node_result(dir, 2).exit_code, 128 + 15) << logs;
  EXPECT_EQ(node_result(dir, 3).exit_code, 2) << logs;
  EXPECT_NE(node_result(dir, 3).output.find("this node was started with --nnodes=1:2 --max-restarts=1"),
            std::string::npos)
      << logs;
  EXPECT_EQ(logs.find("the job was stopped"), std::string::npos) << logs;
}

// A job that failed for good (its worker failed, --max-restarts 0) closes the rendezvous: a node waiting beyond MAX
// ends with one line saying so instead of starting the job again alone (whose worker would now succeed).
TEST(LauncherElasticTest, AJobThatFailedForGoodEndsTheNodesWaitingToJoin) {
  TempDir dir;
  const std::string marker = dir / "failed_once";
  const std::string worker = write_script(
      dir, "worker.sh", "if [ ! -e " + marker + " ]; then touch " + marker + "; sleep 3; exit 7; fi\necho trained\n");
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "1", "") + " -- " + worker;
  run_command(start_node(dir, 0, cmd) + wait_for(dir / "node0.out", "of 1: rank") + start_node(dir, 1, cmd) + "wait\n");
  const std::string logs = node_logs(dir, 2);
  EXPECT_EQ(node_result(dir, 0).exit_code, 1) << logs;
  EXPECT_EQ(node_result(dir, 1).exit_code, 1) << logs;
  EXPECT_NE(node_result(dir, 1).output.find("error: the job was stopped: the job failed: "), std::string::npos) << logs;
  EXPECT_EQ(logs.find("trained"), std::string::npos) << logs;
}

// A node whose ddprun and workers stop answering (SIGSTOP: a hung machine, an unplugged cable) misses its
// keep-alives; the others stop their workers and go on without it.
TEST(LauncherElasticTest, NodeThatStopsAnsweringIsLostByItsKeepAlives) {
  TempDir dir;
  const std::string worker =
      write_script(dir, "worker.sh", "echo \"rank $RANK of $WORLD_SIZE\"; if [ $WORLD_SIZE = 3 ]; then sleep 60; fi\n");
  const std::string cmd = elastic_command("127.0.0.1", free_port(), "2:3", "--max-restarts=1") + " -- " + worker;
  std::string script;
  for (int i = 0; i < 3; ++i) script += start_node(dir, i, cmd);
  script += wait_for(dir / "node0.out", "of 3: rank");
  script += signal_a_node_not_serving(dir, "-STOP");
  // The others finish on 2 nodes; then the frozen node is let go (and killed).
  script += "for i in 0 1 2; do [ $i = $victim ] || while [ ! -s " + dir.path() +
            "/node$i.rc ]; do sleep 0.1; done; done\n" +
            "kill -9 $pid $(pgrep -P $pid); kill -CONT $pid $(pgrep -P $pid); wait\n";
  const auto t = run_timed(script);
  const int victim = std::stoi(read_file(dir / "victim"));
  const std::string logs = node_logs(dir);
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    const auto r = node_result(dir, i);
    EXPECT_EQ(r.exit_code, 0) << logs;
    EXPECT_NE(r.output.find("sent no keep-alive for 3 s"), std::string::npos) << logs;
    EXPECT_NE(r.output.find(" of 2\n"), std::string::npos) << logs;  // the worker's line in the world of 2
  }
  EXPECT_LT(t.seconds, 40.0) << logs;
}

// Nodes may run different numbers of workers: one of --nproc-per-node 1 and one of 2 meet at the endpoint and train as
// one world of 3, the ranks of node rank 1 after those of node rank 0 (which node is which follows (address, pid)); the
// model is the one a single ddprun of 3 workers trains.
TEST(LauncherElasticTest, NodesWithDifferentWorkerCountsTrainAsOneWorldOfTheirSum) {
  TempDir dir;
  const std::string cfg = tiny_elastic_job(dir) + " --training.epochs=1";
  const int port = free_port();
  auto node = [&](int workers) {
    return elastic_command("127.0.0.1", port, "2", "--nproc-per-node=" + std::to_string(workers)) + " -- " +
           ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "mixed";
  };
  run_command(start_node(dir, 0, node(1)) + start_node(dir, 1, node(2)) + "wait\n");
  const std::string logs = node_logs(dir, 2);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(node_result(dir, i).exit_code, 0) << logs;
  const std::string one = node_result(dir, 0).output, two = node_result(dir, 1).output;
  const bool one_first = one.find(": node 0 of 2: rank 0 of 3,") != std::string::npos;
  EXPECT_NE(one.find(one_first ? ": node 0 of 2: rank 0 of 3," : ": node 1 of 2: rank 2 of 3,"), std::string::npos)
      << logs;
  EXPECT_NE(two.find(one_first ? ": node 1 of 2: ranks 1..2 of 3," : ": node 0 of 2: ranks 0..1 of 3,"),
            std::string::npos)
      << logs;
  EXPECT_NE((one + two).find("world 3"), std::string::npos) << logs;
  const CommandResult single =
      run_command("env OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node=3 -- " + ddptrain_path() +
                  " " + cfg + " --job.out_dir=" + dir / "single");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "mixed/model.pt")) << logs;
  EXPECT_EQ(read_file(dir / "mixed/model.pt"), read_file(dir / "single/model.pt")) << logs;
}

// torchrun 2.11 and ddprun launch the same elastic job (c10d rendezvous, --nnodes 2:3, the same line on two nodes)
// to the same world and the same model.pt.
TEST(LauncherElasticTest, TorchrunAndDdprunLaunchTheSameElasticJobToTheSameModel) {
  if (!python_has_modules("torch.distributed.run")) GTEST_SKIP() << python() << " does not have torch.distributed.run";
  TempDir dir, torchrun_dir;
  const std::string cfg = tiny_elastic_job(dir) + " --training.epochs=1";
  const std::string ours = elastic_command("127.0.0.1", free_port(), "2:3", "") + " -- " + ddptrain_path() + " " + cfg +
                           " --job.out_dir=" + dir / "ddprun";
  run_command(start_node(dir, 0, ours) + start_node(dir, 1, ours) + "wait\n");
  const std::string theirs = "env OMP_NUM_THREADS=1 " + python() +
                             " -m torch.distributed.run --nnodes=2:3 --nproc-per-node=1 --rdzv-backend=c10d "
                             "--rdzv-endpoint=127.0.0.1:" +
                             std::to_string(free_port()) +
                             " --rdzv-id=torchrun-test --rdzv-conf=last_call_timeout=1 --monitor-interval=0.1 "
                             "--no-python " +
                             ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "torchrun";
  run_command(start_node(torchrun_dir, 0, theirs) + start_node(torchrun_dir, 1, theirs) + "wait\n");
  const std::string logs = node_logs(dir, 2) + "--- torchrun:\n" + node_logs(torchrun_dir, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(node_result(dir, i).exit_code, 0) << logs;
    EXPECT_EQ(node_result(torchrun_dir, i).exit_code, 0) << logs;
  }
  const std::string ddprun_rank0 = node_result(dir, 0).output + node_result(dir, 1).output;
  const std::string torchrun_rank0 = node_result(torchrun_dir, 0).output + node_result(torchrun_dir, 1).output;
  EXPECT_NE(ddprun_rank0.find("world 2"), std::string::npos) << logs;
  EXPECT_NE(torchrun_rank0.find("world 2"), std::string::npos) << logs;
  ASSERT_TRUE(std::filesystem::exists(dir / "torchrun/model.pt")) << logs;
  EXPECT_EQ(read_file(dir / "ddprun/model.pt"), read_file(dir / "torchrun/model.pt")) << logs;
}

}  // namespace
}  // namespace ddp::test
