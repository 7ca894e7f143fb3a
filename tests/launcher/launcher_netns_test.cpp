// ddprun across two network namespaces joined by a veth pair: trains to the same model.pt as one node of two.
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// Two fresh network namespaces (each its own network stack: every port is free, nothing else is reachable)
// joined by a veth pair whose ends are both called veth0; node n has address 10.213.0.(n + 1)/24.
// The destructor kills whatever still runs inside them and deletes them (the veth pair goes with them).
class VethNamespaces {
 public:
  VethNamespaces() {
    const std::string stem = "ddptest_" + std::to_string(getpid()) + "_";
    names_[0] = stem + "0";
    names_[1] = stem + "1";
  }
  ~VethNamespaces() {
    for (const auto& name : names_)
      run_command("ip netns pids " + name + " 2>/dev/null | xargs -r kill -KILL; ip netns del " + name +
                  " 2>/dev/null");
  }
  VethNamespaces(const VethNamespaces&) = delete;
  VethNamespaces& operator=(const VethNamespaces&) = delete;

  // Empty when both namespaces are up and connected, else why they could not be made.
  std::string create() {
    if (geteuid() != 0)
      return "creating network namespaces needs root (this test runs as uid " + std::to_string(geteuid()) + ")";
    std::string script = "set -e\nip netns add " + names_[0] + "\nip netns add " + names_[1] + "\n" +
                         "ip link add veth0 netns " + names_[0] + " type veth peer name veth0 netns " + names_[1] +
                         "\n";
    for (int n = 0; n < 2; ++n)
      script += "ip -n " + names_[n] + " addr add " + address(n) + "/24 dev veth0\nip -n " + names_[n] +
                " link set lo up\nip -n " + names_[n] + " link set veth0 up\n";
    const auto r = run_command(script);
    if (r.exit_code != 0)
      return "cannot create network namespaces with iproute2 (exit " + std::to_string(r.exit_code) + "): " + r.output;
    return "";
  }

  static std::string address(int node) { return "10.213.0." + std::to_string(node + 1); }
  // Prefix that runs a command inside node's namespace.
  std::string exec(int node) const { return "ip netns exec " + names_[node] + " "; }
  // Pids of the processes still inside node's namespace.
  std::string pids(int node) const { return run_command("ip netns pids " + names_[node]).output; }

 private:
  std::string names_[2];
};

std::string veth_job_config(const TempDir& dir) {
  return write_tiny_job(dir, 128, 32, 4,
                        {"job.seed=3", "data.batch_size=16", "model.name=net", "training.epochs=2",
                         "metrics.progress=plain", "dist.timeout_s=20.0"});
}

TEST(LauncherNetnsTest, TwoNodesInVethNamespacesTrainTheSameModelAsOneNodeOfTwo) {
  VethNamespaces net;
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = veth_job_config(dir);
  // Gloo must use the veth (the host name resolves to an address outside the namespaces). A failing
  // rendezvous gives up after 20 s instead of ddprun's default 600 s.
  auto node = [&](int n) {
    return net.exec(n) + "env GLOO_SOCKET_IFNAME=veth0 OMP_NUM_THREADS=1 " + ddprun_path() +
           " --nnodes 2 --node-rank " + std::to_string(n) + " --nproc-per-node 1 --master-addr " +
           VethNamespaces::address(0) + " --master-port 29500 --rdzv-conf timeout=20 -- " + ddptrain_path() + " " +
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

// Without GLOO_SOCKET_IFNAME each namespace falls back to loopback (the host name's address is not there), so the
// ranks publish 127.0.0.1 to each other and the first to connect is refused. Gloo alone kept the other rank
// waiting 5 x dist.timeout_s (76 s for 15 s); both now end within seconds, each with one error line: the refused
// rank's with the GLOO_SOCKET_IFNAME hint, the other naming it.
TEST(LauncherNetnsTest, UnreachableGlooAddressEndsBothRanksAtOnceWithAHint) {
  VethNamespaces net;
  if (const std::string why = net.create(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = veth_job_config(dir);
  auto rank = [&](int n) {
    return net.exec(n) + "env -u GLOO_SOCKET_IFNAME RANK=" + std::to_string(n) +
           " WORLD_SIZE=2 OMP_NUM_THREADS=1 MASTER_ADDR=" + VethNamespaces::address(0) + " MASTER_PORT=29500 " +
           ddptrain_path() + " " + cfg + " --dist.timeout_s=30 --job.out_dir=" + dir / "out";
  };
  const auto r = run_two_nodes(dir, rank(0), rank(1));
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

}  // namespace
}  // namespace ddp::test
