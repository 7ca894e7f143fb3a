// ddprun: the workers' environment (against torchrun itself), flag spellings, --standalone, usage errors.
#include "tests/launcher/launcher_test_support.h"

#include "launcher/command_line.h"
#include "launcher/flags.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

namespace ddp::test {
namespace {

const std::vector<std::string> kTorchrunVariables = {"RANK",
                                                     "LOCAL_RANK",
                                                     "WORLD_SIZE",
                                                     "LOCAL_WORLD_SIZE",
                                                     "GROUP_RANK",
                                                     "GROUP_WORLD_SIZE",
                                                     "ROLE_RANK",
                                                     "ROLE_NAME",
                                                     "ROLE_WORLD_SIZE",
                                                     "MASTER_ADDR",
                                                     "MASTER_PORT",
                                                     "TORCHELASTIC_RESTART_COUNT",
                                                     "TORCHELASTIC_MAX_RESTARTS",
                                                     "TORCHELASTIC_RUN_ID",
                                                     "TORCH_NCCL_ASYNC_ERROR_HANDLING"};

// A PROGRAM that dumps its environment to DIR/env_<TAG>_<RANK>.
std::string env_dump_script(const TempDir& dir) {
  return write_script(dir, "dump.sh", "env > " + dir.path() + "/env_${TAG}_$RANK\n");
}

// Ranks 0..ranks-1 saw the same torchrun variables under ddprun (dir/env_ddprun_R) as under torchrun (env_torchrun_R),
// but MASTER_PORT: each launch had its own, torchrun's `torchrun_port`.
void expect_env_like_torchrun(const TempDir& dir, int ranks, int torchrun_port) {
  for (int rank = 0; rank < ranks; ++rank) {
    auto ours = parse_env_file(dir / ("env_ddprun_" + std::to_string(rank)));
    auto theirs = parse_env_file(dir / ("env_torchrun_" + std::to_string(rank)));
    for (const auto& name : kTorchrunVariables) {
      ASSERT_TRUE(theirs.count(name)) << "torchrun did not set " << name;
      ASSERT_TRUE(ours.count(name)) << "ddprun did not set " << name;
      if (name == "MASTER_PORT") {
        EXPECT_EQ(theirs.at(name), std::to_string(torchrun_port));
        continue;
      }
      EXPECT_EQ(ours.at(name), theirs.at(name)) << name << " of rank " << rank;
    }
  }
}

int cpus() {
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}

// What the spec says worker `rank` of a job sees.
void expect_worker_env(const std::map<std::string, std::string>& env, int nnodes, int nproc, int rank, int port,
                       const std::string& run_id, int max_restarts) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  EXPECT_EQ(env.at("RANK"), std::to_string(rank));
  EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank % nproc));
  EXPECT_EQ(env.at("WORLD_SIZE"), std::to_string(nnodes * nproc));
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), std::to_string(nproc));
  EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(rank / nproc));
  EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), std::to_string(nnodes));
  EXPECT_EQ(env.at("ROLE_RANK"), std::to_string(rank));
  EXPECT_EQ(env.at("ROLE_WORLD_SIZE"), std::to_string(nnodes * nproc));
  EXPECT_EQ(env.at("ROLE_NAME"), "default");
  EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(port));
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), std::to_string(max_restarts));
  EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), run_id);
  // Workers host their own store (rank 0), which ddptrain does when this is not "True".
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
}

TEST(LauncherEnvTest, TwoProcessesGetTorchrunVariablesAndOmpThreads) {
  TempDir dir;
  const std::string script = env_dump_script(dir);
  const int port = free_port();
  auto r = run_command("env -u OMP_NUM_THREADS TAG=a " + ddprun_path() +
                       " --nproc-per-node=2 --master-port=" + std::to_string(port) + " " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string omp = std::to_string(std::max(1, cpus() / 2));
  for (int rank = 0; rank < 2; ++rank) {
    auto env = parse_env_file(dir / ("env_a_" + std::to_string(rank)));
    expect_worker_env(env, 1, 2, rank, port, "none", 0);
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), omp);
  }
  // Said once, not per worker.
  const size_t first = r.output.find("OMP_NUM_THREADS is not set");
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("OMP_NUM_THREADS is not set", first + 1), std::string::npos) << r.output;

  // A value the user set is passed on untouched, without the note.
  // So are NCCL's own settings and a user's choice of async error handling (NCCL_DEBUG passes through).
  r = run_command("OMP_NUM_THREADS=7 NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth7 TORCH_NCCL_ASYNC_ERROR_HANDLING=3 TAG=b " +
                  ddprun_path() + " --nproc-per-node=2 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto env_b = parse_env_file(dir / "env_b_1");
  EXPECT_EQ(env_b.at("OMP_NUM_THREADS"), "7");
  EXPECT_EQ(env_b.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(env_b.at("NCCL_SOCKET_IFNAME"), "eth7");
  EXPECT_EQ(env_b.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  EXPECT_EQ(r.output.find("OMP_NUM_THREADS is not set"), std::string::npos) << r.output;
}

TEST(LauncherEnvTest, TwoNodesOfTwoMatchTorchrun) {
  TempDir dir;
  const std::string script = env_dump_script(dir);
  const int port = free_port_pair();
  auto node = [&](const std::string& tag, int node_rank) {
    return "TAG=" + tag + " " + ddprun_path() + " --nnodes=2 --node_rank=" + std::to_string(node_rank) +
           " --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=" + std::to_string(port) +
           " --max_restarts=2 --rdzv_id=job7 " + script;
  };
  auto r = run_two_nodes(dir, node("ddprun", 0), node("ddprun", 1));
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  for (int rank = 0; rank < 4; ++rank)
    expect_worker_env(parse_env_file(dir / ("env_ddprun_" + std::to_string(rank))), 2, 2, rank, port, "job7", 2);

  if (!python_has_modules("torch.distributed.run"))
    GTEST_SKIP() << python() << " does not have torch.distributed.run; compared with the spec only";
  const int torchrun_port = free_port();
  auto torchrun = [&](int node_rank) {
    return "TAG=torchrun " + python() +
           " -m torch.distributed.run --nnodes=2 --node_rank=" + std::to_string(node_rank) +
           " --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=" + std::to_string(torchrun_port) +
           " --max_restarts=2 --rdzv_id=job7 --monitor_interval=0.1 --no_python" +
           " --redirects=1 --tee=2 --log_dir=" + dir / ("torchrun_logs" + std::to_string(node_rank)) + " " + script;
  };
  TempDir torchrun_dir;
  auto t = run_two_nodes(torchrun_dir, torchrun(0), torchrun(1));
  ASSERT_EQ(t.node0.exit_code, 0) << t.node0.output;
  ASSERT_EQ(t.node1.exit_code, 0) << t.node1.output;
  expect_env_like_torchrun(dir, 4, torchrun_port);
}

// Nodes may run different numbers of workers: node 0 with one and node 1 with two get ranks 0 and 1..2 of 3, each node
// its own LOCAL_WORLD_SIZE, as torchrun 2.11 assigns them (its agent's _assign_worker_ranks).
TEST(LauncherEnvTest, NodesOfOneAndTwoWorkersMatchTorchrun) {
  TempDir dir;
  const std::string script = env_dump_script(dir);
  auto launch = [&](const std::string& launcher, const std::string& tag, int port) {
    return [=](int node_rank) {
      return "TAG=" + tag + " " + launcher + " --nnodes=2 --node-rank=" + std::to_string(node_rank) +
             " --nproc-per-node=" + std::to_string(node_rank + 1) +
             " --master-addr=127.0.0.1 --master-port=" + std::to_string(port) + " --rdzv-id=mixed " + script;
    };
  };
  const int port = free_port_pair();
  auto ddprun = launch(ddprun_path(), "ddprun", port);
  auto r = run_two_nodes(dir, ddprun(0), ddprun(1));
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_NE(r.node0.output.find("node 0 of 2: rank 0 of 3,"), std::string::npos) << r.node0.output;
  EXPECT_NE(r.node1.output.find("node 1 of 2: ranks 1..2 of 3,"), std::string::npos) << r.node1.output;
  const std::map<std::string, std::string> expected[] = {
      {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"GROUP_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}},
      {{"RANK", "1"}, {"LOCAL_RANK", "0"}, {"GROUP_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}},
      {{"RANK", "2"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}};
  for (int rank = 0; rank < 3; ++rank) {
    const auto env = parse_env_file(dir / ("env_ddprun_" + std::to_string(rank)));
    for (const auto& [name, value] : expected[rank]) EXPECT_EQ(env.at(name), value) << name << " of rank " << rank;
    for (const char* name : {"WORLD_SIZE", "ROLE_WORLD_SIZE"}) EXPECT_EQ(env.at(name), "3") << name;
    EXPECT_EQ(env.at("ROLE_RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "env_ddprun_3"));

  if (!python_has_modules("torch.distributed.run"))
    GTEST_SKIP() << python() << " does not have torch.distributed.run; compared with the spec only";
  const int torchrun_port = free_port();
  auto torchrun =
      launch(python() + " -m torch.distributed.run --monitor-interval=0.1 --no-python", "torchrun", torchrun_port);
  TempDir torchrun_dir;
  auto t = run_two_nodes(torchrun_dir, torchrun(0), torchrun(1));
  ASSERT_EQ(t.node0.exit_code, 0) << t.node0.output;
  ASSERT_EQ(t.node1.exit_code, 0) << t.node1.output;
  expect_env_like_torchrun(dir, 3, torchrun_port);
}

TEST(LauncherFlagsTest, DashesUnderscoresEqualsAndSpaceAllWork) {
  TempDir dir;
  const std::string script = env_dump_script(dir);
  const int port = free_port();
  const std::string p = std::to_string(port);
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"seed", "--nproc_per_node=2 --nnodes=1 --node_rank=0 --master_addr=127.0.0.1 --master_port=" + p +
                   " --max_restarts=3 --run_id=r1 --role=trainer"},
      {"dashes", "--nproc-per-node 2 --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port " + p +
                     " --max-restarts 3 --run-id r1 --role trainer"},
      {"mixed", "--nproc_per_node 2 --nnodes=1:1 --node-rank=0 --master_addr 127.0.0.1 --master-port=" + p +
                    " --max-restarts=3 --rdzv-id r1 --role=trainer --"},
  };
  for (const auto& [tag, flags] : spellings) {
    auto r = run_command("TAG=" + tag + " " + ddprun_path() + " " + flags + " " + script);
    ASSERT_EQ(r.exit_code, 0) << tag << ": " << r.output;
    for (int rank = 0; rank < 2; ++rank) {
      auto env = parse_env_file(dir / ("env_" + tag + "_" + std::to_string(rank)));
      EXPECT_EQ(env.at("RANK"), std::to_string(rank)) << tag;
      EXPECT_EQ(env.at("WORLD_SIZE"), "2") << tag;
      EXPECT_EQ(env.at("MASTER_PORT"), p) << tag;
      EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), "3") << tag;
      EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), "r1") << tag;
      EXPECT_EQ(env.at("ROLE_NAME"), "trainer") << tag;
    }
  }
}

TEST(LauncherFlagsTest, ArgumentsAfterProgramBelongToProgram) {
  TempDir dir;
  const std::string script = write_script(dir, "args.sh", "echo \"args: $*\"\n");
  auto r = run_command(ddprun_path() + " --nproc-per-node 1 " + script + " --nproc-per-node=5 -- x");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("args: --nproc-per-node=5 -- x\n"), std::string::npos) << r.output;
}

TEST(LauncherFlagsTest, ParsesEveryFlagInEverySpelling) {
  auto o = parse_launch_args({"--nnodes=2:2",
                              "--nproc_per_node",
                              "3",
                              "--node-rank=1",
                              "--master_addr",
                              "10.0.0.1",
                              "--master-port=29555",
                              "--max_restarts=4",
                              "--log_dir",
                              "/tmp/x",
                              "-r",
                              "0:1,2:3",
                              "--tee=2",
                              "--run-id=abc",
                              "--role",
                              "r",
                              "--rdzv_conf=timeout=12",
                              "--grace_period=1.5",
                              "--signals_to_handle=SIGUSR2,term",
                              "--local_ranks_filter=0,2",
                              "--no-python",
                              "prog",
                              "--nnodes=9",
                              "a"});
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.nproc_per_node, 3);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 29555);
  EXPECT_EQ(o.max_restarts, 4);
  EXPECT_EQ(o.log_dir, "/tmp/x");
  EXPECT_EQ(o.redirects.for_local_rank(0), 1);
  EXPECT_EQ(o.redirects.for_local_rank(1), 0);
  EXPECT_EQ(o.redirects.for_local_rank(2), 3);
  EXPECT_EQ(o.tee.for_local_rank(5), 2);
  EXPECT_TRUE(o.streams_chosen);
  EXPECT_EQ(o.run_id, "abc");
  EXPECT_EQ(o.role, "r");
  EXPECT_EQ(o.rdzv_conf.join_timeout, 12);
  EXPECT_EQ(o.grace_period_s, 1.5);
  EXPECT_EQ(o.signals_to_handle, (std::vector<int>{SIGUSR2, SIGTERM}));
  EXPECT_EQ(o.local_ranks_filter, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(parse_launch_args({"prog"}).local_ranks_filter.empty());
  // torchrun's default list, and SIGUSR1 (a scheduler's time limit ahead)
  EXPECT_EQ(parse_launch_args({"prog"}).signals_to_handle,
            (std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1}));
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--nnodes=9", "a"}));
  EXPECT_FALSE(parse_launch_args({"prog"}).standalone);
  EXPECT_TRUE(parse_launch_args({"--standalone", "--", "prog"}).standalone);
  EXPECT_EQ(parse_launch_args({"--nproc-per-node=auto", "prog"}).nproc_per_node, cpus());
}

// torchrun's c10d rendezvous flags: an endpoint (default port 29400), a node range, its --rdzv-conf keys.
TEST(LauncherFlagsTest, C10dRendezvousFlagsTakeTorchrunsFormsAndDefaults) {
  const auto o = parse_launch_args({"--rdzv-backend=c10d", "--rdzv-endpoint=node0.cluster", "--rdzv-id=job7",
                                    "--nnodes=2:4", "--local-addr=10.1.2.3", "--monitor-interval=0.5",
                                    "--rdzv-conf=join_timeout=20,last_call_timeout=2,close_timeout=3,read_timeout=4,"
                                    "keep_alive_interval=1.5,keep_alive_max_attempt=2,is_host=false",
                                    "prog"});
  EXPECT_TRUE(elastic(o));
  EXPECT_EQ(o.rdzv_host, "node0.cluster");
  EXPECT_EQ(o.rdzv_port, 29400);
  EXPECT_EQ(o.run_id, "job7");
  EXPECT_EQ(o.min_nodes, 2);
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_EQ(o.local_addr, "10.1.2.3");
  EXPECT_EQ(o.monitor_interval_s, 0.5);
  EXPECT_EQ(o.rdzv_conf.join_timeout, 20);
  EXPECT_EQ(o.rdzv_conf.last_call_timeout, 2);
  EXPECT_EQ(o.rdzv_conf.close_timeout, 3);
  EXPECT_EQ(o.rdzv_conf.read_timeout, 4);
  EXPECT_EQ(o.rdzv_conf.keep_alive_interval, 1.5);
  EXPECT_EQ(o.rdzv_conf.keep_alive_max_attempt, 2);
  EXPECT_EQ(o.rdzv_conf.is_host, 0);
  const auto v6 = parse_launch_args({"--rdzv-backend", "c10d", "--rdzv-endpoint", "[::1]:1234", "prog"});
  EXPECT_EQ(v6.rdzv_host, "::1");
  EXPECT_EQ(v6.rdzv_port, 1234);
  EXPECT_EQ(v6.min_nodes, 1);
  EXPECT_EQ(v6.rdzv_conf.last_call_timeout, 30);  // torchrun's defaults
  EXPECT_EQ(v6.rdzv_conf.keep_alive_max_attempt, 3);
  EXPECT_EQ(v6.monitor_interval_s, 0.1);
  // The static backend takes the endpoint as node 0's MASTER_ADDR:MASTER_PORT, as torchrun does.
  const auto st = parse_launch_args({"--rdzv-endpoint=10.0.0.9:2222", "--nnodes=2", "--node-rank=1", "prog"});
  EXPECT_FALSE(elastic(st));
  EXPECT_EQ(st.master_addr, "10.0.0.9");
  EXPECT_EQ(st.master_port, 2222);
}

// --nproc-per-node's words as torchrun's determine_local_world_size counts them, on nodes the test describes.
TEST(LauncherFlagsTest, NprocPerNodeWordsCountGpusOrCpusAsTorchrunDoes) {
  int gpu_asks = 0;
  const NodeCounts four_gpus{[&] { return ++gpu_asks, int64_t{4}; }, [] { return int64_t{32}; }};
  const NodeCounts no_gpu{[] { return int64_t{0}; }, [] { return int64_t{6}; }};
  auto nproc = [](const std::string& word, const NodeCounts& node) {
    return parse_launch_args({"--nproc-per-node=" + word, "prog"}, node).nproc_per_node;
  };
  EXPECT_EQ(nproc("gpu", four_gpus), 4);
  EXPECT_EQ(nproc("auto", four_gpus), 4);  // GPUs first, as torch.accelerator.is_available() decides
  EXPECT_EQ(nproc("cpu", four_gpus), 32);
  EXPECT_EQ(nproc("auto", no_gpu), 6);
  EXPECT_EQ(nproc("cpu", no_gpu), 6);
  gpu_asks = 0;
  EXPECT_EQ(nproc("3", four_gpus), 3);
  EXPECT_EQ(gpu_asks, 0);  // a number asks nothing of CUDA
  const std::string error = error_of([&] { nproc("gpu", no_gpu); });
  EXPECT_NE(error.find("--nproc-per-node=gpu: no CUDA GPU is visible on this node"), std::string::npos) << error;
  EXPECT_NE(error_of([&] { nproc("tpu", no_gpu); }).find("expected a number of workers >= 1, gpu, cpu or auto"),
            std::string::npos);
  // This machine: a CPU-only test machine has no GPU, so gpu is refused; auto is its CPU count.
  if (this_node().gpus() == 0) {
    EXPECT_THROW(parse_launch_args({"--nproc-per-node=gpu", "prog"}), LaunchUsageError);
    EXPECT_EQ(parse_launch_args({"--nproc-per-node=auto", "prog"}).nproc_per_node, cpus());
  }
}

TEST(LauncherFlagsTest, UsageErrorsExitTwoWithOneErrorLine) {
  const std::vector<std::vector<std::string>> bad = {
      {"--bogus=1", "p"},
      {"--nproc-per-node", "p"},  // "p" is taken as the count
      {"--nproc-per-node=0", "p"},
      {"--nproc-per-node=two", "p"},
      {"--nnodes=1:4", "p"},
      {"--nnodes=2", "--node-rank=2", "p"},
      {"--master-port=70000", "p"},
      {"--nnodes=2", "--master-port=65535", "p"},
      {"--standalone", "--nnodes=2", "p"},
      {"--redirects=3", "p"},
      {"--tee=5", "--log-dir=/tmp", "p"},
      {"-r", "0:1,x", "--log-dir=/tmp", "p"},
      {"--rdzv-conf=bogus=5", "p"},
      {"--rdzv-conf=keep_alive_max_attempt=0", "p"},
      {"--rdzv-conf=is_host=maybe", "p"},
      {"--rdzv-backend=etcd", "--rdzv-endpoint=h", "p"},
      {"--rdzv-backend=c10d", "p"},  // no endpoint
      {"--rdzv-backend=c10d", "--rdzv-endpoint=h", "--nnodes=3:2", "p"},
      {"--rdzv-backend=c10d", "--rdzv-endpoint=h:0", "p"},
      {"--rdzv-backend=c10d", "--rdzv-endpoint=h", "--standalone", "p"},
      {"--rdzv-backend=c10d", "--rdzv-endpoint=h", "--redirects=3", "p"},  // else nothing would show the output
      {"--monitor-interval=0", "p"},
      {"--grace-period=-1", "p"},
      {"--grace-period=inf", "p"},           // durations are bounded: a week at most
      {"--signals-to-handle=SIGKILL", "p"},  // cannot be caught
      {"--signals-to-handle=", "p"},
      {"--local-ranks-filter=-1", "p"},
      {"--local-ranks-filter=a", "p"},
      {"--rdzv-conf=timeout=1e300", "p"},
      {"--standalone=1", "p"},
      {"--nproc-per-node=2"},
      {"--"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(parse_launch_args(args), LaunchUsageError) << joined;
  }
  // torchrun's flags that ddprun lacks are named as such, with what to do instead.
  for (const char* flag : {"--start-method=spawn", "--start_method=fork", "-m", "--run-path=x", "--logs-specs=x",
                           "--numa-binding=node", "--virtual-local-rank", "--event-log-handler=null"}) {
    const std::string error = error_of([&] { parse_launch_args({flag, "p"}); });
    EXPECT_NE(error.find(": torchrun's flag, not supported by ddprun: "), std::string::npos) << flag << ": " << error;
  }
  // The binary: exit 2 and a single "error:" line, for a parse error and for a PROGRAM that does not exist.
  TempDir dir;
  for (const std::string& args : {std::string("--nnodes=1:4 /bin/true"), "--nproc-per-node=1 " + dir / "missing.sh"}) {
    auto r = run_command(ddprun_path() + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
  auto help = run_command(ddprun_path() + " --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--nnodes",
                           "--nproc-per-node",
                           "--node-rank",
                           "--master-addr",
                           "--master-port",
                           "--standalone",
                           "--max-restarts",
                           "--log-dir",
                           "--tee",
                           "--redirects",
                           "--run-id",
                           "--signals-to-handle",
                           "--local-ranks-filter",
                           "--rdzv-backend",
                           "--rdzv-endpoint",
                           "--rdzv-id",
                           "--rdzv-conf",
                           "--local-addr",
                           "--monitor-interval",
                           "MIN:MAX"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

// --help is generated from the flag table: every row shows its spellings, default, torchrun flag, worker variable and
// doc, and every spelling it shows is one the parser takes.
TEST(LauncherFlagsTest, HelpListsEveryFlagRowAndTheParserTakesEverySpelling) {
  auto collapsed = [](const std::string& text) {  // wrapped lines read as one
    std::string out;
    for (char c : text) {
      if (!std::isspace(static_cast<unsigned char>(c)))
        out += c;
      else if (!out.empty() && out.back() != ' ')
        out += ' ';
    }
    return out;
  };
  const std::map<std::string, std::string> samples = {
      {"node-rank", "0"}, {"rdzv-backend", "static"}, {"rdzv-conf", "timeout=5"}, {"signals-to-handle", "SIGTERM"}};
  const std::string usage = collapsed(launch_usage());
  for (const FlagRow& row : launch_flags()) {
    std::vector<std::string> spellings = {std::string("--") + row.name};
    for (const char* alias : row.aliases) spellings.push_back(alias[0] == '-' ? alias : std::string("--") + alias);
    for (const auto& spelling : spellings) {
      EXPECT_NE(usage.find(spelling), std::string::npos) << spelling;
      std::vector<std::string> args = {"--log-dir=/tmp", spelling};
      if (*row.value) args.push_back(samples.count(row.name) ? samples.at(row.name) : "1");
      args.push_back("prog");
      EXPECT_NO_THROW(parse_launch_args(args)) << spelling;
    }
    EXPECT_NE(usage.find(collapsed(row.doc)), std::string::npos) << row.name;
    const std::vector<std::pair<std::string, const char*>> facts = {
        {"default ", row.default_text}, {"torchrun ", row.torchrun}, {"sets ", row.worker_env}};
    for (const auto& [label, fact] : facts) {
      if (*fact) {
        EXPECT_NE(usage.find(label + fact), std::string::npos) << row.name << ": " << label << fact;
      }
    }
  }
}

TEST(LauncherFlagsTest, StandaloneUsesAFreeLocalPortAndARunId) {
  TempDir dir;
  const std::string script = env_dump_script(dir);
  auto r = run_command("TAG=s " + ddprun_path() + " --standalone --nproc-per-node=2 --master-port=1 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto env0 = parse_env_file(dir / "env_s_0"), env1 = parse_env_file(dir / "env_s_1");
  EXPECT_EQ(env0.at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_NE(env0.at("MASTER_PORT"), "1");  // torchrun ignores explicit endpoints under --standalone, so does ddprun
  EXPECT_NE(env0.at("MASTER_PORT"), "29500");
  EXPECT_TRUE(port_is_free(std::stoi(env0.at("MASTER_PORT"))));
  EXPECT_EQ(env0.at("MASTER_PORT"), env1.at("MASTER_PORT"));
  EXPECT_NE(env0.at("TORCHELASTIC_RUN_ID"), "none");
  EXPECT_EQ(env0.at("TORCHELASTIC_RUN_ID"), env1.at("TORCHELASTIC_RUN_ID"));
  EXPECT_EQ(env0.at("WORLD_SIZE"), "2");
}

}  // namespace
}  // namespace ddp::test
