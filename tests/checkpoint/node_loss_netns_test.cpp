// checkpoint.replicas across nodes that are network namespaces under ddprun, each with its own working directory (a
// node-local disk): a whole node lost in the middle of its background write, and the job restarted on the nodes left.
#include "checkpoint/checkpoint_store.h"
#include "tests/checkpoint/resume_job.h"
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// ddprun on `node` of `net`, as node rank `node_rank` of `nnodes` (one rank each), rendezvous at `master`'s address,
// in the working directory `cwd`; `env` ("K=V ...") is its environment's too, and its rank's. The serving ddprun waits
// --grace-period + 10 s for the others to leave its store, which a node that lost power never does: 15 s here.
std::string ddprun_on(const NodeNamespaces& net, int node, const std::string& cwd, int nnodes, int node_rank,
                      int master, const std::string& args, const std::string& env = "") {
  fs::create_directories(cwd);
  return net.exec(node) + "env -C " + shell_quote(cwd) + " GLOO_SOCKET_IFNAME=veth0 OMP_NUM_THREADS=1 " + env + " " +
         ddprun_path() + " --nnodes " + std::to_string(nnodes) + " --node-rank " + std::to_string(node_rank) +
         " --nproc-per-node 1 --master-addr " + NodeNamespaces::address(master) +
         " --master-port 29500 --rdzv-conf timeout=20 --grace-period 5 -- " + ddptrain_path() + " " + args;
}

CheckpointStore node_store(const std::string& cwd) { return CheckpointStore(cwd + "/run/checkpoints", 0, 0); }

std::string partial_files(const std::string& cwd) {
  std::string names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cwd + "/run/checkpoints", ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) names += e.path().filename().string() + " ";
  return names;
}

// Nodes a, b and c train (ranks 0, 1, 2, all-reduces over the veths) with a checkpoint every 2 steps. Node c's rank
// stops in the middle of its write of the step-4 checkpoint, and the whole node (its ddprun and its rank) is killed
// with SIGKILL, as a machine that lost power. The ranks of a and b stop with an error; a and b hold step 4 whole, c
// its step 2 and a partial file. The job started again on b and c (b's rank now rank 0) resumes from step 4 (b's
// copy), writes it to c, which lacked it, and ends with the model of the same job resumed from node a's copy.
TEST(CheckpointNodeLoss, AWholeNodeKilledInItsBackgroundWriteLeavesTheNewestCompleteCopyToTheOthers) {
  NodeNamespaces net(3);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string a = dir / "a", b = dir / "b", c = dir / "c";
  const std::string cfg = ckpt_job_config(dir) +
                          " --model.dropout=0.0 --job.out_dir=run --checkpoint.every_steps=2 --dist.allreduce=gloo"
                          " --dist.timeout_s=30 --training.max_steps=8";
  // Node c's rank is the one whose write of a step-4 file is stopped (ddprun writes no such file).
  const std::vector<std::string> cwd{a, b, c};
  std::string script;
  for (int n = 0; n < 3; ++n) {
    const std::string env = n == 2 ? fault_env("write", "step-00000004.pt.tmp-", "stop") : "";
    const std::string out = dir / ("lost" + std::to_string(n));
    script += "(" + ddprun_on(net, n, cwd[static_cast<size_t>(n)], 3, n, 0, cfg, env) + " > " + out +
              ".out 2>&1; echo $? > " + out + ".rc) &\n";
  }
  // Node c is lost once a process inside it stopped (up to 120 s), or at once if none does; its folder and its
  // processes (command, state) at that moment go to c_when_lost.txt.
  script += "for i in $(seq 1200); do\n  for p in $(" + net.list_pids(2) +
            "); do grep -q '^State:.*stopped' /proc/$p/status 2>/dev/null && break 2; done\n  sleep 0.1\ndone\n" +
            "ls -l " + shell_quote(c + "/run/checkpoints") + " > " + dir / "c_when_lost.txt" + "\nfor p in $(" +
            net.list_pids(2) +
            "); do echo $p $(tr '\\0' ' ' < /proc/$p/cmdline | cut -c1-80) $(grep State /proc/$p/status); done >> " +
            dir / "c_when_lost.txt" + "\n" + net.kill_all(2) + "\nwait\n";
  const auto lost = run_timed(script);
  const std::string out0 = read_file(dir / "lost0.out"), out1 = read_file(dir / "lost1.out");
  const std::string at_loss = read_file(dir / "c_when_lost.txt");
  // The loss came in the write: c's folder then held a partial step-4 file, and the ranks left ended with an error.
  EXPECT_NE(at_loss.find("step-00000004.pt.tmp-"), std::string::npos) << at_loss << read_file(dir / "lost2.out");
  EXPECT_NE(std::stoi(read_file(dir / "lost0.rc")), 0) << out0;
  EXPECT_NE(std::stoi(read_file(dir / "lost1.rc")), 0) << out1;
  EXPECT_NE(out0.find("error: "), std::string::npos) << out0;
  EXPECT_LT(lost.seconds, 150.0) << out0 << out1;
  EXPECT_EQ(net.pids(0) + net.pids(1) + net.pids(2), "");
  // Every node's previous complete copy is its newest; a and b finished step 4 (the same bytes), c did not.
  EXPECT_EQ(read_file(node_store(a).payload_path(4)), read_file(node_store(b).payload_path(4)));
  for (const std::string& node : {a, b}) EXPECT_EQ(node_store(node).list().front().step, 4) << node;
  ASSERT_FALSE(node_store(c).list().empty());
  EXPECT_EQ(node_store(c).list().front().step, 2);
  EXPECT_FALSE(fs::exists(node_store(c).manifest_path(4)));
  ASSERT_FALSE(HasFailure());

  // The same job resumed from node a's copy alone, at the restart's world size: the model the restart must end with.
  const std::string ref = dir / "ref_a";
  fs::copy(a, ref, fs::copy_options::recursive);
  const auto reference = run_ranks(2, cfg, "", 1, "", {on_node(0, ref), on_node(1, dir / "ref_b")});
  for (const auto& r : reference) ASSERT_EQ(r.exit_code, 0) << r.output;

  // Nodes b and c, b first: the newest complete copy is b's step 4, which c gets before training goes on.
  const auto again = run_two_nodes(dir, ddprun_on(net, 1, b, 2, 0, 1, cfg), ddprun_on(net, 2, c, 2, 1, 1, cfg));
  ASSERT_EQ(again.node0.exit_code, 0) << again.node0.output << "\n--- node c:\n" << again.node1.output;
  ASSERT_EQ(again.node1.exit_code, 0) << again.node1.output << "\n--- node b:\n" << again.node0.output;
  EXPECT_NE(
      again.node0.output.find("resumed from " + CheckpointStore("run/checkpoints", 0, 0).payload_path(4) + " on host "),
      std::string::npos)
      << again.node0.output;
  EXPECT_NE(again.node0.output.find("wrote the checkpoint of step 4 to 1 node that lacked it"), std::string::npos)
      << again.node0.output;
  EXPECT_EQ(read_file(node_store(c).payload_path(4)), read_file(node_store(a).payload_path(4)));
  EXPECT_EQ(partial_files(c), "");
  EXPECT_EQ(node_store(c).list().front().step, 8);
  EXPECT_TRUE(ckpt_same_bytes(b + "/run/model.pt", ref + "/run/model.pt"))
      << "max diff " << max_state_diff(b + "/run/model.pt", ref + "/run/model.pt");
}

}  // namespace
}  // namespace ddp::test
