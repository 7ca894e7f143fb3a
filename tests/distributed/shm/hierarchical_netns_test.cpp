// The hierarchical all-reduce between hosts: two nodes of two ranks, each node a network namespace with its own pid
// namespace, /proc and /dev/shm (as another machine: no rank there can open a segment of the other's), joined by a
// veth pair under ddprun.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

// ddprun on `node` as node rank `node` of 2 (2 ranks each), inside its own pid and mount namespace with a private
// tmpfs on /dev/shm.
std::string own_host_node(const NodeNamespaces& net, int node, const std::string& args) {
  return net.exec(node) + "env GLOO_SOCKET_IFNAME=veth0 OMP_NUM_THREADS=1 " + as_own_host() + ddprun_path() +
         " --nnodes 2 --node-rank " + std::to_string(node) + " --nproc-per-node 2 --master-addr " +
         NodeNamespaces::address(0) + " --master-port 29500 --rdzv-conf timeout=20 -- " + ddptrain_path() + " " + args;
}

// Bytes node sent through its end of the link so far.
long long link_bytes_sent(const NodeNamespaces& net, int node) {
  const auto r = run_command(net.exec(node) + "cat /sys/class/net/veth0/statistics/tx_bytes");
  return r.exit_code == 0 ? std::stoll(r.output) : -1;
}

std::string hosts_job_config(const TempDir& dir) {
  return write_tiny_job(dir, 512, 32, 6,
                        {"job.seed=8", "data.batch_size=8", "model.name=resnet18", "optimizer.lr=0.05",
                         "optimizer.momentum=0.9", "metrics.progress=plain", "dist.timeout_s=30.0",
                         "dist.check_replicas_every=1"});
}

struct LinkRun {
  TwoNodeResult result;
  long long bytes = 0;  // both nodes' bytes onto the link
};

LinkRun run_on_two_hosts(const NodeNamespaces& net, const TempDir& dir, const std::string& args) {
  const long long before = link_bytes_sent(net, 0) + link_bytes_sent(net, 1);
  LinkRun run;
  run.result = run_two_nodes(dir, own_host_node(net, 0, args), own_host_node(net, 1, args));
  run.bytes = link_bytes_sent(net, 0) + link_bytes_sent(net, 1) - before;
  return run;
}

// dist.allreduce = "auto" cannot share one segment between the hosts and picks the hierarchical all-reduce; each
// gradient crosses the link once per direction between the nodes' first ranks instead of in Gloo's ring of four
// ranks, which crosses it twice (ranks 1 -> 2 and 3 -> 0) with 3/4 of the gradient each way: 2/3 of the bytes per
// step (the bytes of 6 steps less those of 2: start-up, DDP's first broadcast and the end are the same in both). The
// model is the one the same job trains with "hierarchical" on one host (the same reductions in the same order), and
// every rank's parameters are the same bits at every step (dist.check_replicas_every = 1).
TEST(HierarchicalAllreduceHosts, AutoPicksItAcrossHostsSendsLessOverTheLinkAndTrainsTheOneHostModel) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  if (!own_host_allowed()) GTEST_SKIP() << "unshare -m -p with a private /dev/shm is not allowed here";
  TempDir dir;
  const std::string cfg = hosts_job_config(dir);
  double per_step[2] = {0, 0};  // hierarchical, flat
  for (int path = 0; path < 2; ++path) {
    long long bytes[2] = {0, 0};
    for (int steps : {2, 6}) {
      const std::string out = dir / ((path == 0 ? "hier" : "flat") + std::to_string(steps));
      const LinkRun run =
          run_on_two_hosts(net, dir,
                           cfg + (path == 0 ? "" : " --dist.allreduce=gloo") +
                               " --training.max_steps=" + std::to_string(steps) + " --job.out_dir=" + out);
      ASSERT_EQ(run.result.node0.exit_code, 0) << run.result.node0.output << "\n--- node 1:\n"
                                               << run.result.node1.output;
      ASSERT_EQ(run.result.node1.exit_code, 0) << run.result.node1.output;
      const std::string said = path == 0
                                   ? "| all-reduce hierarchical (shared memory in each node, gloo between nodes)\n"
                                   : "| all-reduce gloo\n";
      EXPECT_NE(run.result.node0.output.find(said), std::string::npos) << run.result.node0.output;
      bytes[steps == 6] = run.bytes;
    }
    per_step[path] = static_cast<double>(bytes[1] - bytes[0]) / 4;
  }
  EXPECT_EQ(net.pids(0) + net.pids(1), "");
  std::printf("link bytes per step: hierarchical %.0f, flat Gloo ring %.0f (%.3f)\n", per_step[0], per_step[1],
              per_step[0] / per_step[1]);
  EXPECT_LE(per_step[0], 0.7 * per_step[1]) << per_step[0] << " vs " << per_step[1];

  std::vector<std::string> nodes_of_two;
  for (int r = 0; r < 4; ++r) nodes_of_two.push_back("env LOCAL_RANK=" + std::to_string(r % 2) + " LOCAL_WORLD_SIZE=2");
  const auto one_host =
      run_ranks(4, cfg + " --dist.allreduce=hierarchical --training.max_steps=6 --job.out_dir=" + dir / "one_host", "",
                1, "", nodes_of_two);
  for (const auto& r : one_host) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(one_host[0].output.find("| all-reduce hierarchical"), std::string::npos) << one_host[0].output;
  EXPECT_TRUE(read_file(dir / "hier6/model.pt") == read_file(dir / "one_host/model.pt"))
      << "max |diff| " << max_state_diff(dir / "hier6/model.pt", dir / "one_host/model.pt");
}

// A rank killed (SIGKILL) in the middle of training, a node's first rank (which all-reduces across the link) or not:
// its node's other rank sees it gone in the segment, the other node's first rank loses its Gloo peer, and every rank
// left ends with an error within seconds, not dist.timeout_s; both ddpruns end, nothing is left running.
TEST(HierarchicalAllreduceHosts, ARankKilledMidTrainingEndsEveryRankOnBothHosts) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  if (!own_host_allowed()) GTEST_SKIP() << "unshare -m -p with a private /dev/shm is not allowed here";
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 4096, 32, 6,
                     {"job.seed=8", "data.batch_size=8", "model.name=net", "training.epochs=50",
                      "metrics.log_every_steps=1", "metrics.progress=plain", "dist.timeout_s=60.0"});
  for (int victim : {2, 3}) {
    const std::string out = dir / ("victim" + std::to_string(victim));
    const std::string args = cfg + " --dist.allreduce=hierarchical --job.out_dir=" + out;
    // Both nodes in the background; once step 3 is logged, SIGKILL the victim (a ddptrain whose environment says
    // RANK=victim, inside node 1) and time how long the rest of the job takes to end.
    std::string script;
    for (int n = 0; n < 2; ++n)
      script += "(" + own_host_node(net, n, args) + " > " + out + std::to_string(n) + ".out 2>&1; echo $? > " + out +
                std::to_string(n) + ".rc) &\n";
    script += "for i in $(seq 1200); do grep -q '\"step\":3,' " + out +
              "/metrics.jsonl 2>/dev/null && break; sleep 0.05; done\nv=; for p in $(" + net.list_pids(1) +
              "); do [ \"$(cat /proc/$p/comm 2>/dev/null)\" = ddptrain ] && tr '\\0' '\\n' < /proc/$p/environ | "
              "grep -qx RANK=" +
              std::to_string(victim) +
              " && v=$p; done\nkill -KILL $v; t0=$(date +%s%N); echo \"killed $v\"\nwait\n"
              "echo \"ended_ms $(( ($(date +%s%N) - t0) / 1000000 ))\"\n";
    const auto r = run_command(script);
    ASSERT_NE(r.output.find("killed "), std::string::npos) << r.output;
    ASSERT_EQ(r.output.find("killed \n"), std::string::npos) << "rank " << victim << " not found\n" << r.output;
    const auto at = r.output.find("ended_ms ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const double seconds = std::stod(r.output.substr(at + 9)) / 1000;
    for (int n = 0; n < 2; ++n) {
      const std::string said = read_file(out + std::to_string(n) + ".out");
      EXPECT_NE(std::stoi(read_file(out + std::to_string(n) + ".rc")), 0) << said;
      EXPECT_NE(said.find("error: "), std::string::npos) << "victim " << victim << ", node " << n << ":\n" << said;
    }
    // The victim's node-mate names it by its rank in the job.
    const std::string mate = "[rank " + std::to_string(victim == 2 ? 3 : 2) +
                             "] error: shared-memory all-reduce: rank " + std::to_string(victim) + " (pid ";
    EXPECT_NE(read_file(out + "1.out").find(mate), std::string::npos) << read_file(out + "1.out");
    EXPECT_LT(seconds, 30.0) << "victim " << victim << "\n" << read_file(out + "0.out") << read_file(out + "1.out");
    EXPECT_EQ(net.pids(0) + net.pids(1), "");
    std::printf("rank %d killed: the job ended %.1f s later\n", victim, seconds);
  }
}

// mpirun's variables (no GROUP_WORLD_SIZE) for nodes of 2, 1 and 1 ranks, each node its own host: ranks 0 and 1 see
// nodes of two (a world of 4 in nodes of LOCAL_WORLD_SIZE 2), ranks 2 and 3 nodes of one. dist.allreduce = "auto"
// must reach the same answer on every rank (Gloo's ring, saying why not per node), not leave ranks 0 and 1 waiting
// for a hierarchical set-up the others never join.
TEST(HierarchicalAllreduceHosts, AutoWithNodesOfDifferentSizesKeepsGlooOnEveryRank) {
  NodeNamespaces net(3);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  if (!own_host_allowed()) GTEST_SKIP() << "unshare -m -p with a private /dev/shm is not allowed here";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 256, 32, 6,
                                         {"job.seed=8", "data.batch_size=8", "model.name=net", "training.max_steps=3",
                                          "metrics.progress=plain", "dist.timeout_s=60.0"});
  const std::vector<int> node_of{0, 0, 1, 2};
  std::string script;
  for (int n = 0; n < 3; ++n) {
    // Each node's ranks run from one script inside that node's own host.
    std::string ranks;
    const int local_size = static_cast<int>(std::count(node_of.begin(), node_of.end(), n));
    for (int r = 0, local = 0; r < 4; ++r) {
      if (node_of[static_cast<size_t>(r)] != n) continue;
      const std::string rank = std::to_string(r);
      ranks += "(env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=veth0 MASTER_ADDR=" + NodeNamespaces::address(0) +
               " MASTER_PORT=29500 OMPI_COMM_WORLD_RANK=" + rank +
               " OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(local++) +
               " OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(local_size) +
               " OMPI_COMM_WORLD_NODE_RANK=" + std::to_string(n) + " " + ddptrain_path() + " " + cfg +
               " --job.out_dir=" + dir / "out" + " > " + dir / ("rank" + rank + ".out") + " 2>&1; echo $? > " +
               dir / ("rank" + rank + ".rc") + ") &\n";
    }
    write_file(dir / ("node" + std::to_string(n) + ".sh"), ranks + "wait\n");
    script += net.exec(n) + as_own_host() + "sh " + dir / ("node" + std::to_string(n) + ".sh") + " &\n";
  }
  const auto r = run_timed(script + "wait\n");
  for (int rank = 0; rank < 4; ++rank) {
    const std::string name = "rank" + std::to_string(rank);
    const std::string said = read_file(dir / (name + ".out"));
    EXPECT_EQ(std::stoi(read_file(dir / (name + ".rc"))), 0) << name << ":\n" << said;
  }
  const std::string banner = read_file(dir / "rank0.out");
  EXPECT_NE(banner.find("| all-reduce gloo (shared memory not used: "), std::string::npos) << banner;
  EXPECT_NE(banner.find("within each node: rank 2: LOCAL_WORLD_SIZE 1, rank 0's is 2: it needs nodes of the same "
                        "number of ranks"),
            std::string::npos)
      << banner;
  EXPECT_LT(r.seconds, 30.0) << banner;  // a rank left waiting would wait out dist.timeout_s (60 s)
}

}  // namespace
}  // namespace ddp::test
