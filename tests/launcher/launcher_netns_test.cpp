// ddprun across two network namespaces joined by a veth pair: trains to the same model.pt as one node of two.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

namespace ddp::test {
namespace {

std::string veth_job_config(const TempDir& dir) {
  return write_tiny_job(dir, 128, 32, 4,
                        {"job.seed=3", "data.batch_size=16", "model.name=net", "training.epochs=2",
                         "metrics.progress=plain", "dist.timeout_s=20.0"});
}

TEST(LauncherNetnsTest, TwoNodesInVethNamespacesTrainTheSameModelAsOneNodeOfTwo) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = veth_job_config(dir);
  // Gloo must use the veth (the host name resolves to an address outside the namespaces). A failing
  // rendezvous gives up after 20 s instead of ddprun's default 600 s.
  auto node = [&](int n) {
    return net.exec(n) + "env GLOO_SOCKET_IFNAME=veth0 OMP_NUM_THREADS=1 " + ddprun_path() +
           " --nnodes 2 --node-rank " + std::to_string(n) + " --nproc-per-node 1 --master-addr " +
           NodeNamespaces::address(0) + " --master-port 29500 --rdzv-conf timeout=20 -- " + ddptrain_path() + " " +
           cfg + " --job.out_dir=" + dir / "two_namespaces";
  };
  const auto r = run_two_nodes(dir, node(0), node(1));
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output << "\n--- node 1:\n" << r.node1.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output << "\n--- node 0:\n" << r.node0.output;
  EXPECT_NE(r.node0.output.find("world 2"), std::string::npos) << r.node0.output;
  EXPECT_EQ(net.pids(0), "");
  EXPECT_EQ(net.pids(1), "");
  ASSERT_TRUE(std::filesystem::exists(dir / "two_namespaces/model.pt")) << r.node0.output;

  const auto one = run_command("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node 2 " +
                               ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "one_node");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_TRUE(read_file(dir / "two_namespaces/model.pt") == read_file(dir / "one_node/model.pt"))
      << "model.pt differs, max |diff| = "
      << max_state_diff(dir / "two_namespaces/model.pt", dir / "one_node/model.pt");
}

// Rank n of 2 of the job `cfg` in namespace n, without GLOO_SOCKET_IFNAME, with `env` ("NAME=value ...") added.
std::string rank_without_interface(const NodeNamespaces& net, const TempDir& dir, const std::string& cfg, int n,
                                   const std::string& env, int timeout_s) {
  return net.exec(n) + "env -u GLOO_SOCKET_IFNAME " + env + " RANK=" + std::to_string(n) +
         " WORLD_SIZE=2 OMP_NUM_THREADS=1 MASTER_ADDR=" + NodeNamespaces::address(0) + " MASTER_PORT=29500 " +
         ddptrain_path() + " " + cfg + " --dist.timeout_s=" + std::to_string(timeout_s) +
         " --job.out_dir=" + dir / "out";
}

// Without GLOO_SOCKET_IFNAME each namespace falls back to loopback (the host name's address is not there), so the
// ranks publish 127.0.0.1 to each other and the first to connect is refused. Gloo alone kept the other rank
// waiting 5 x dist.timeout_s (76 s for 15 s); both now end within seconds, each with one error line: the refused
// rank's with the GLOO_SOCKET_IFNAME hint, the other naming it.
TEST(LauncherNetnsTest, UnreachableGlooAddressEndsBothRanksAtOnceWithAHint) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = veth_job_config(dir);
  const auto r = run_two_nodes(dir, rank_without_interface(net, dir, cfg, 0, "", 30),
                               rank_without_interface(net, dir, cfg, 1, "", 30));
  EXPECT_LT(r.seconds, 15.0);
  const std::string both = r.node0.output + r.node1.output;
  for (const auto* node : {&r.node0, &r.node1}) {
    EXPECT_EQ(node->exit_code, 1) << node->output;
    size_t errors = 0;
    for (size_t at = node->output.find("error:"); at != std::string::npos; at = node->output.find("error:", at + 1))
      ++errors;
    EXPECT_EQ(errors, 1u) << node->output;
  }
  EXPECT_NE(both.find("could not connect the process group"), std::string::npos) << both;
  // Gloo 2.11 words it "timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:PORT"; the hint follows.
  EXPECT_NE(both.find("Connection refused"), std::string::npos) << both;
  EXPECT_NE(both.find("(a peer published a loopback address"), std::string::npos) << both;
  EXPECT_NE(both.find("GLOO_SOCKET_IFNAME"), std::string::npos) << both;
  EXPECT_NE(both.find("the process group failed to connect on another rank: rank "), std::string::npos) << both;
  EXPECT_EQ(net.pids(0), "");
  EXPECT_EQ(net.pids(1), "");
}

// The same with TORCH_GLOO_LAZY_INIT=1: the group is made without connecting, and the refused connection comes at the
// first collective. The refused rank ends with the GLOO_SOCKET_IFNAME hint; the other, whose pair was never
// connected, is held by no reset (Gloo alone kept it 5 x dist.timeout_s, 100 s for 20 s): it reads the failure
// through the store and ends within seconds with the refused rank's line, naming that rank.
TEST(LauncherNetnsTest, UnreachableGlooAddressUnderLazyInitEndsBothRanksAtOnceWithAHint) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = veth_job_config(dir), lazy = "TORCH_GLOO_LAZY_INIT=1";
  const auto r = run_two_nodes(dir, rank_without_interface(net, dir, cfg, 0, lazy, 20),
                               rank_without_interface(net, dir, cfg, 1, lazy, 20));
  EXPECT_LT(r.seconds, 15.0);
  std::vector<std::string> lines;
  for (const auto* node : {&r.node0, &r.node1}) {
    EXPECT_EQ(node->exit_code, 1) << node->output;
    for (size_t at = node->output.find("error:"); at != std::string::npos; at = node->output.find("error:", at + 1))
      lines.push_back(node->output.substr(at, node->output.find('\n', at) - at));
  }
  ASSERT_EQ(lines.size(), 2u) << r.node0.output << r.node1.output;
  // One rank was refused; the other says that rank failed, with its host and pid and the same line.
  const bool first_refused = lines[0].find(" failed: ") == std::string::npos;
  const std::string& refused = lines[first_refused ? 0 : 1];
  const std::string& ended = lines[first_refused ? 1 : 0];
  EXPECT_NE(refused.find("Connection refused"), std::string::npos) << refused;
  EXPECT_NE(refused.find("(a peer published a loopback address"), std::string::npos) << refused;
  const std::string refused_rank = first_refused ? "0" : "1";
  EXPECT_EQ(ended.rfind("error: rank " + refused_rank + " (host ", 0), 0u) << ended;
  EXPECT_NE(ended.find(", pid "), std::string::npos) << ended;
  EXPECT_NE(ended.find(" failed: " + refused.substr(std::string("error: ").size())), std::string::npos) << ended;
  EXPECT_EQ(net.pids(0), "");
  EXPECT_EQ(net.pids(1), "");
}

// A link that goes down mid-training sends no reset: node 1's ddprun, asking node 0's store whether the job goes on,
// would wait on TCP's retransmissions for many minutes with its failed worker unreaped. Each request to the store
// has --rdzv-conf read_timeout (2 s here): node 1 says it lost node 0's ddprun and stops its worker; node 0's worker
// fails on dist.timeout_s (10 s) and node 0 waits --grace-period + 10 s for node 1 to leave, then exits too.
TEST(LauncherNetnsTest, ALinkThatGoesDownEndsBothNodesWithinTheirTimeouts) {
  NodeNamespaces net(2);
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 4096, 32, 4,
                     {"job.seed=3", "data.batch_size=8", "model.name=net", "training.epochs=50",
                      "metrics.log_every_steps=1", "metrics.progress=plain", "dist.timeout_s=10.0"});
  const std::string out = dir / "out";
  std::string script;
  for (int n = 0; n < 2; ++n)
    script += "(timeout -k 5 120 " + net.exec(n) + "env GLOO_SOCKET_IFNAME=veth0 OMP_NUM_THREADS=1 " + ddprun_path() +
              " --nnodes 2 --node-rank " + std::to_string(n) + " --nproc-per-node 1 --master-addr " +
              NodeNamespaces::address(0) + " --master-port 29500 --rdzv-conf timeout=20,read_timeout=2 " +
              "--grace-period 3 -- " + ddptrain_path() + " " + cfg + " --job.out_dir=" + out + " > " + dir / "node" +
              std::to_string(n) + ".out 2>&1; echo $? > " + dir / "node" + std::to_string(n) + ".rc) &\n";
  script += "for i in $(seq 1200); do grep -q '\"step\":3,' " + out +
            "/metrics.jsonl 2>/dev/null && break; sleep 0.05; done\n" + net.exec(1) +
            "ip link set veth0 down\nt0=$(date +%s%N)\nwait\necho \"ended_ms $(( ($(date +%s%N) - t0) / 1000000 ))\"\n";
  const auto r = run_command(script);
  const auto at = r.output.find("ended_ms ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const double seconds = std::stod(r.output.substr(at + 9)) / 1000;
  const std::string node0 = read_file(dir / "node0.out"), node1 = read_file(dir / "node1.out");
  // 124 or 137: `timeout` ended a ddprun that was still waiting.
  EXPECT_EQ(std::stoi(read_file(dir / "node0.rc")), 1) << node0;
  EXPECT_EQ(std::stoi(read_file(dir / "node1.rc")), 1) << node1;
  EXPECT_NE(node1.find("error: lost contact with node 0's ddprun at " + NodeNamespaces::address(0) +
                       ":29501: no answer within 2 s (--rdzv-conf read_timeout): its host is unreachable or stopped"),
            std::string::npos)
      << node1;
  EXPECT_NE(node0.find("error: the job failed: rank 0 "), std::string::npos) << node0;
  // dist.timeout_s, then node 0's wait for node 1 to leave (--grace-period + 10 s), with room for a slow machine.
  EXPECT_LT(seconds, 60.0) << node0 << "\n--- node 1:\n" << node1;
  EXPECT_EQ(net.pids(0) + net.pids(1), "");
  std::printf("link down: node 0 and node 1 ended %.1f s later\n", seconds);
}

}  // namespace
}  // namespace ddp::test
