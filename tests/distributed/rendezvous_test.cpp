// Rendezvous: env parsing, bounded joins, port in use, NCCL on CPU, dead peers.
//
// Env parsing (torchrun, Slurm, Open MPI), bounded joins naming missing ranks, port in use, NCCL on a CPU build,
// and a dead peer ending the job instead of hanging it.
#include "distributed/rendezvous.h"

#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>

#include <algorithm>
#include <torch/cuda.h>

namespace ddp::test {
namespace {

using Env = std::map<std::string, std::string>;

std::string env_error(const Env& env) {
  try {
    rendezvous_from_env(env);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Rendezvous, NoVariablesIsWorldOfOne) {
  RendezvousInfo info = rendezvous_from_env({{"HOME", "/root"}});
  EXPECT_FALSE(info.present);
  EXPECT_EQ(info.world_size, 1);
  DistContext ctx = init_distributed(info, DistConfig{});
  EXPECT_FALSE(ctx.distributed());
  EXPECT_FALSE(ctx.store);
}

TEST(Rendezvous, TorchrunVariables) {
  RendezvousInfo info = rendezvous_from_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"},
                                             {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
                                             {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.group_rank, 1);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_TRUE(info.agent_store);
  EXPECT_EQ(info.restart_count, 2);
  EXPECT_EQ(rendezvous_from_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).restart_count, 0);
}

TEST(Rendezvous, SlurmAndOpenMpiVariables) {
  RendezvousInfo slurm = rendezvous_from_env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                              {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(slurm.source, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.local_rank, 1);
  RendezvousInfo mpi = rendezvous_from_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"},
                                            {"MASTER_PORT", "1234"}});
  EXPECT_EQ(mpi.source, "openmpi");
  EXPECT_EQ(mpi.rank, 2);
  EXPECT_EQ(mpi.world_size, 3);
  // torchrun's variables win when both are present.
  RendezvousInfo both = rendezvous_from_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(both.source, "torchrun");
}

TEST(Rendezvous, MalformedVariablesNameTheVariable) {
  EXPECT_NE(env_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=\"x\""), std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}}).find("WORLD_SIZE is missing"), std::string::npos);
  EXPECT_NE(env_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("rank 2 is out of range for world size 2"),
            std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}).find("MASTER_ADDR is required"),
            std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT is required"),
            std::string::npos);
  EXPECT_NE(env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000"),
            std::string::npos);
}

// Under Slurm an unset MASTER_ADDR is the first host of SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else
// SLURM_NODELIST, and an unset MASTER_PORT is Lightning's SLURMEnvironment.main_port: the job id's last 4 digits +
// 15000, or 12910 without a job id. Set variables win; the origin is what the banner shows.
TEST(Rendezvous, SlurmAddressFromTheNodeListAndPortFromTheJobId) {
  const Env task = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"}};
  struct Case {
    Env env;
    std::string addr;
    int port;
    std::string origin;
  };
  const std::vector<Case> cases = {
      {{{"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"SLURM_JOB_ID", "4242123"}},
       "gpu01",
       17123,
       "first host of SLURM_JOB_NODELIST, port from SLURM_JOB_ID"},
      {{{"SLURM_STEP_NODELIST", "gpu[03-04]"}, {"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"SLURM_JOB_ID", "77"}},
       "gpu03",
       15077,
       "first host of SLURM_STEP_NODELIST, port from SLURM_JOB_ID"},
      {{{"SLURM_NODELIST", "login1,n[7-8]"}, {"SLURM_JOB_ID", "120000"}},
       "login1",
       15000,
       "first host of SLURM_NODELIST, port from SLURM_JOB_ID"},
      {{{"SLURM_JOB_NODELIST", "n[009-010]x[2,4]"}, {"SLURM_JOB_ID", "9999"}},
       "n009x2",
       24999,
       "first host of SLURM_JOB_NODELIST, port from SLURM_JOB_ID"},
      {{{"SLURM_JOB_NODELIST", "a1"}},
       "a1",
       12910,
       "first host of SLURM_JOB_NODELIST, port 12910 without SLURM_JOB_ID"},
      {{{"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"SLURM_JOB_ID", "4242123"}, {"MASTER_ADDR", "10.0.0.7"}},
       "10.0.0.7",
       17123,
       "MASTER_ADDR, port from SLURM_JOB_ID"},
      {{{"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"SLURM_JOB_ID", "4242123"}, {"MASTER_PORT", "29500"}},
       "gpu01",
       29500,
       "first host of SLURM_JOB_NODELIST, MASTER_PORT"},
      {{{"SLURM_JOB_NODELIST", "gpu[01-04]"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}}, "h", 1234, "MASTER_ADDR"},
  };
  for (const Case& c : cases) {
    Env env = task;
    env.insert(c.env.begin(), c.env.end());
    const RendezvousInfo info = rendezvous_from_env(env);
    EXPECT_EQ(info.master_addr, c.addr) << c.origin;
    EXPECT_EQ(info.master_port, c.port) << c.origin;
    EXPECT_EQ(info.master_origin, c.origin);
  }
  // torchrun's and Open MPI's variables never read the node list or the job id.
  const Env slurm_vars = {{"SLURM_JOB_NODELIST", "gpu01"}, {"SLURM_JOB_ID", "12"}};
  Env torchrun = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  torchrun.insert(slurm_vars.begin(), slurm_vars.end());
  EXPECT_NE(env_error(torchrun).find("MASTER_ADDR and MASTER_PORT are required"), std::string::npos);
  Env mpi = {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  mpi.insert(slurm_vars.begin(), slurm_vars.end());
  EXPECT_NE(env_error(mpi).find("MASTER_ADDR and MASTER_PORT are required"), std::string::npos);
  // Malformed ones name the variable.
  Env bad_list = task;
  bad_list["SLURM_JOB_NODELIST"] = "gpu[01-";
  EXPECT_EQ(env_error(bad_list).rfind("environment variable SLURM_JOB_NODELIST: ", 0), 0u) << env_error(bad_list);
  Env bad_id = task;
  bad_id["SLURM_JOB_NODELIST"] = "gpu01";
  bad_id["SLURM_JOB_ID"] = "12_3";
  EXPECT_EQ(env_error(bad_id).rfind("environment variable SLURM_JOB_ID=\"12_3\" is not a job id", 0), 0u)
      << env_error(bad_id);
}

// Every count and rank is bounded and the error names the variable at once: WORLD_SIZE=4294967297 must not wrap to 1
// in an int, and WORLD_SIZE=10^6 must not be waited for.
TEST(Rendezvous, OutOfRangeCountsNameTheVariableAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const Env addr = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](Env env) {
    env.insert(addr.begin(), addr.end());
    return env_error(env);
  };
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "4294967297"}}),
            "environment variable WORLD_SIZE=4294967297 is out of range [1, 65536]");
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "1000000"}}),
            "environment variable WORLD_SIZE=1000000 is out of range [1, 65536]");
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "environment variable WORLD_SIZE=0 is out of range [1, 65536]");
  EXPECT_EQ(with({{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}}),
            "environment variable RANK=99999999999 is out of range [0, 65535]");
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "4294967296"}}),
            "environment variable LOCAL_RANK=4294967296 is out of range [0, 65535]");
  EXPECT_EQ(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1000000"}}),
            "environment variable SLURM_NTASKS=1000000 is out of range [1, 65536]");
  EXPECT_EQ(with({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4294967297"}}),
            "environment variable OMPI_COMM_WORLD_SIZE=4294967297 is out of range [1, 65536]");
  EXPECT_EQ(env_error({{"RANK", "65535"}, {"WORLD_SIZE", "65536"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}), "");
  // The job secret: 16 to 1024 characters.
  const Env job = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  EXPECT_EQ(with(job), "");
  auto secret = [&](size_t n) {
    Env env = job;
    env["DDPTRAIN_JOB_SECRET"] = std::string(n, 'k');
    return with(env);
  };
  EXPECT_EQ(secret(15), "environment variable DDPTRAIN_JOB_SECRET has 15 characters; give 16 to 1024 (openssl rand -hex 32)");
  EXPECT_EQ(secret(1025), "environment variable DDPTRAIN_JOB_SECRET has 1025 characters; give 16 to 1024 (openssl rand -hex 32)");
  EXPECT_EQ(secret(16), "");
  EXPECT_EQ(secret(1024), "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

// The binary: one error line, exit 1, no waiting for a million ranks.
TEST(Rendezvous, HugeWorldSizeEndsDdptrainAtOnce) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 1);
  write_file(dir / "cfg.toml", "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"mnist\"\ndir = \"" +
                                   dir / "data" + "\"\n[dist]\ntimeout_s = 60.0\n");
  for (const std::string world : {"4294967297", "1000000"}) {
    const auto start = std::chrono::steady_clock::now();
    auto r = run_command("RANK=0 WORLD_SIZE=" + world + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                         std::to_string(free_port()) + " timeout -s KILL 30 " + ddptrain_path() + " " + dir / "cfg.toml");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "error: environment variable WORLD_SIZE=" + world + " is out of range [1, 65536]\n");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  }
}

// A world > 1 without MASTER_ADDR/MASTER_PORT: one line naming the launcher the rank variables came from and how to
// set the variables under it.
TEST(Rendezvous, MissingMasterAddressNamesTheLauncherAndHowToSetIt) {
  const std::string slurm = env_error({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(slurm.rfind("environment variable MASTER_ADDR is required for a world of 4 (rank 1; launcher: Slurm "
                        "(srun)): ddptrain takes the first host of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or "
                        "SLURM_NODELIST, and none is set: export MASTER_ADDR=<host of rank 0> before srun",
                        0),
            0u)
      << slurm;
  const std::string mpi = env_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(mpi.rfind("environment variables MASTER_ADDR and MASTER_PORT are required for a world of 2 (rank 0; "
                      "launcher: Open MPI (mpirun)): pass them to every rank: mpirun -x MASTER_ADDR=<host of rank 0> "
                      "-x MASTER_PORT=29500 ...",
                      0),
            0u)
      << mpi;
  const std::string agent =
      env_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"TORCHELASTIC_RESTART_COUNT", "0"}});
  EXPECT_NE(agent.find("MASTER_PORT is required for a world of 2 (rank 1; launcher: torchrun/ddprun): torchrun and "
                       "ddprun set both"),
            std::string::npos)
      << agent;
  const std::string by_hand = env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(by_hand.find("(rank 0; launcher: RANK/WORLD_SIZE set by hand): set MASTER_ADDR=<host of rank 0> "
                         "MASTER_PORT=29500 for every rank, or start the workers with ddprun --master_addr=HOST "
                         "--master_port=29500 (one machine: ddprun --standalone)"),
            std::string::npos)
      << by_hand;
  for (const auto& message : {slurm, mpi, agent, by_hand}) EXPECT_EQ(message.find('\n'), std::string::npos);
  // A world of one needs neither, under any launcher.
  EXPECT_EQ(env_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), "");
  EXPECT_EQ(env_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}), "");
}

// Without a GPU (or without the CUDA path built in), nccl is one clear error naming what is missing; with one, the
// machine is not what this test is about.
TEST(Rendezvous, NcclWithoutAGpuIsAClearError) {
  if (cuda_build() && torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
  DistConfig cfg;
  cfg.backend = BackendChoice::Nccl;
  try {
    init_distributed(rendezvous_from_env({}), cfg);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (cuda_build())
      EXPECT_NE(what.find("needs CUDA device cuda:0 (LOCAL_RANK 0) but no CUDA device is visible"), std::string::npos)
          << what;
    else
      EXPECT_NE(what.find("needs a CUDA build"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// The binary says so on its one error line, and exits 1.
TEST(Rendezvous, NcclWithoutAGpuEndsDdptrainWithOneErrorLine) {
  if (cuda_build() && torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 16, 1);
  write_file(dir / "cfg.toml", "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"mnist\"\ndir = \"" +
                                   dir / "data" + "\"\n");
  auto r = run_command(ddptrain_path() + " " + dir / "cfg.toml" + " --dist.backend=nccl");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: dist.device = \"auto\" with dist.backend = \"nccl\" needs ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

std::string tiny_job(const TempDir& dir) {
  write_tiny_mnist(dir / "data", 64, 16, 1);
  write_file(dir / "cfg.toml", "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"mnist\"\ndir = \"" +
                                   dir / "data" + "\"\nbatch_size = 8\n[dist]\ntimeout_s = 2.0\n");
  return dir / "cfg.toml";
}

TEST(Rendezvous, MissingPeerTimesOutNamingRanksAndAddress) {
  TempDir dir;
  std::string cfg = tiny_job(dir);
  const int port = free_port();
  auto start = std::chrono::steady_clock::now();
  auto r = run_command("RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                       ddptrain_path() + " " + cfg);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank(s) 1, 2 of 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timed out after 2 s"), std::string::npos) << r.output;
  EXPECT_LT(secs, 20.0);
}

TEST(Rendezvous, ClientWithoutServerFailsClearly) {
  TempDir dir;
  std::string cfg = tiny_job(dir);
  const int port = free_port();
  auto r = run_command("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                       ddptrain_path() + " " + cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[rank 1] error: rank 1: could not reach the store at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << r.output;
}

TEST(Rendezvous, PortInUseNamesAddressAndPort) {
  TempDir dir;
  std::string cfg = tiny_job(dir);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  auto r = run_command("RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                       ddptrain_path() + " " + cfg);
  close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot serve the store on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << r.output;
}

TEST(Rendezvous, DeadPeerEndsTheJobInsteadOfHanging) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 4000, 16, 1);
  write_file(dir / "cfg.toml", "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"mnist\"\ndir = \"" +
                                   dir / "data" + "\"\nbatch_size = 8\n[training]\nepochs = 50\n[dist]\ntimeout_s = 20.0\n");
  const int port = free_port();
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                          " OMP_NUM_THREADS=1 ";
  auto start = std::chrono::steady_clock::now();
  // Rank 1 is killed (SIGKILL) after 3 s; rank 0 must fail on its own, well before its 20 s timeout x epochs.
  auto r = run_command("(RANK=1 " + env + "timeout -s KILL 3 " + ddptrain_path() + " " + dir / "cfg.toml" +
                       " >/dev/null 2>&1 &) ; RANK=0 " + env + ddptrain_path() + " " + dir / "cfg.toml");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  EXPECT_LT(secs, 30.0) << r.output;
}

}  // namespace
}  // namespace ddp::test
