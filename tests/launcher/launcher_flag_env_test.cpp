// ddprun's flags from the environment: torchrun 2.11's PET_* variables (parity with its parser), and srun's node
// count, node id and node list; two ddprun "nodes" given only Slurm's and Kubeflow's variables train one model.
#include "launcher/command_line.h"
#include "launcher/flags.h"
#include "tests/launcher/launcher_test_support.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace ddp::test {
namespace {

using Env = std::map<std::string, std::string>;

struct PetCase {
  Env env;
  std::vector<std::string> argv;
  std::string refused_by;  // the variable ddprun's error names when torchrun refuses the case ("" = accepted)
};

// The fields torchrun_args.py prints, from ddprun's parsed options; "error" when ddprun refuses the case.
std::string ddprun_fields(const PetCase& c) {
  std::vector<std::string> args = c.argv;
  args.push_back("prog");
  try {
    const LaunchOptions o = parse_launch_args(args, this_node(), c.env);
    return "nnodes=" + std::to_string(o.min_nodes) + ":" + std::to_string(o.nnodes) +
           " nproc_per_node=" + std::to_string(o.nproc_per_node) + " node_rank=" + std::to_string(o.node_rank) +
           " master_addr=" + o.master_addr + " master_port=" + std::to_string(o.master_port) +
           " rdzv_backend=" + o.rdzv_backend + " rdzv_endpoint=" + o.rdzv_endpoint + " rdzv_id=" + o.run_id +
           " max_restarts=" + std::to_string(o.max_restarts) + " standalone=" + (o.standalone ? "1" : "0");
  } catch (const LaunchUsageError& e) {
    const std::string what = e.what();
    return c.refused_by.empty() || what.rfind("environment variable " + c.refused_by + "=", 0) != 0 ? what : "error";
  }
}

TEST(LauncherFlagEnvTest, PetVariablesParseAsTorchrunParsesThem) {
  if (!python_has_modules("torch.distributed.run")) GTEST_SKIP() << python() << " does not have torch.distributed.run";
  const Env kubeflow = {{"PET_NNODES", "2"},
                        {"PET_NODE_RANK", "1"},
                        {"PET_MASTER_ADDR", "job-master-0"},
                        {"PET_MASTER_PORT", "23456"},
                        {"PET_NPROC_PER_NODE", "2"}};
  const std::vector<PetCase> cases = {
      {{}, {}, ""},
      {kubeflow, {}, ""},
      {kubeflow, {"--node-rank=0", "--master_addr", "h0", "--nproc-per-node", "1"}, ""},
      {{{"PET_RDZV_BACKEND", "c10d"},
        {"PET_RDZV_ENDPOINT", "head:29400"},
        {"PET_RDZV_ID", "job7"},
        {"PET_NNODES", "1:3"}},
       {},
       ""},
      {{{"PET_RDZV_ID", "abc"}}, {"--rdzv_id", "xyz", "--rdzv-backend=c10d", "--rdzv-endpoint=e:1"}, ""},
      {{{"PET_MAX_RESTARTS", "3"}, {"PET_STANDALONE", "1"}}, {}, ""},
      {{{"PET_MAX_RESTARTS", "3"}, {"PET_STANDALONE", "0"}}, {"--max-restarts=1", "--standalone"}, ""},
      {{{"PET_STANDALONE", "2"}}, {}, ""},
      {{{"PET_STANDALONE", "0"}}, {}, ""},
      {{{"PET_NODE_RANK", "x"}, {"PET_NNODES", "2"}}, {"--node-rank=0"}, ""},  // a flag given: its variable unread
      {{{"PET_MAX_RESTARTS", "many"}}, {}, "PET_MAX_RESTARTS"},
      {{{"PET_MASTER_PORT", "port"}}, {}, "PET_MASTER_PORT"},
      {{{"PET_NNODES", "two"}}, {}, "PET_NNODES"},
      {{{"PET_NPROC_PER_NODE", "0x2"}}, {}, "PET_NPROC_PER_NODE"},
      {{{"PET_STANDALONE", "yes"}}, {}, "PET_STANDALONE"},
  };
  TempDir dir;
  nlohmann::json json = nlohmann::json::array();
  for (const PetCase& c : cases) json.push_back({c.env, c.argv});
  write_file(dir / "cases.json", json.dump());
  const CommandResult torchrun =
      run_command(shell_quote(python()) + " " + source_dir() + "/tests/python/torchrun_args.py " + dir / "cases.json");
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.output;
  std::istringstream lines(torchrun.output);
  for (const PetCase& c : cases) {
    std::string expected;
    ASSERT_TRUE(std::getline(lines, expected)) << torchrun.output;
    EXPECT_EQ(ddprun_fields(c), expected) << nlohmann::json({c.env, c.argv}).dump();
  }
}

// Each row that mirrors a torchrun flag reads the variable torchrun's parser reads for that flag (PET_<DEST> of its
// env / check_env action), and only those rows read one.
TEST(LauncherFlagEnvTest, EachRowReadsTheVariableTorchrunReadsForItsFlag) {
  if (!python_has_modules("torch.distributed.run")) GTEST_SKIP() << python() << " does not have torch.distributed.run";
  const CommandResult names =
      run_command(shell_quote(python()) + " " + source_dir() + "/tests/python/torchrun_args.py --pet-names");
  ASSERT_EQ(names.exit_code, 0) << names.output;
  std::map<std::string, std::string> pet_of;
  std::istringstream lines(names.output);
  for (std::string flag, pet; lines >> flag >> pet;) pet_of[flag] = pet;
  ASSERT_GT(pet_of.size(), 20u) << names.output;
  for (const FlagRow& row : launch_flags()) {
    const auto it = pet_of.find(row.torchrun);
    EXPECT_EQ(row.pet_env, it == pet_of.end() ? "" : it->second) << row.name;
  }
}

// A PET_ value ddprun cannot read ends it as a bad flag does: exit 2, one line naming the variable.
TEST(LauncherFlagEnvTest, UnreadablePetVariableIsAUsageError) {
  const CommandResult r = run_command("PET_MAX_RESTARTS=many " + ddprun_path() + " --standalone true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("error: environment variable PET_MAX_RESTARTS=\"many\": ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

// Under srun (SLURM_STEP_NUM_NODES set) --nnodes, --node-rank and --master-addr default to the step's node count, this
// node's id, and MASTER_ADDR or the node list's first host; flags and PET_ variables win; outside a step nothing
// changes.
TEST(LauncherFlagEnvTest, SrunStepGivesNodeCountRankAndMasterAddress) {
  const Env step = {{"SLURM_STEP_NUM_NODES", "4"},
                    {"SLURM_NNODES", "4"},
                    {"SLURM_NODEID", "2"},
                    {"SLURM_STEP_NODELIST", "gpu[03-06]"},
                    {"SLURM_JOB_NODELIST", "gpu[01-08]"}};
  auto parse = [](const Env& env, std::vector<std::string> args = {}) {
    args.push_back("prog");
    return parse_launch_args(args, this_node(), env);
  };
  const LaunchOptions o = parse(step);
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_EQ(o.min_nodes, 4);
  EXPECT_EQ(o.node_rank, 2);
  EXPECT_EQ(o.master_addr, "gpu03");
  EXPECT_EQ(o.master_port, 29500);
  Env job_list = step;
  job_list.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(parse(job_list).master_addr, "gpu01");
  Env exported = step;
  exported["MASTER_ADDR"] = "10.0.0.5";
  EXPECT_EQ(parse(exported).master_addr, "10.0.0.5");
  Env pet = exported;
  pet["PET_MASTER_ADDR"] = "pet-host";
  pet["PET_NODE_RANK"] = "3";
  EXPECT_EQ(parse(pet).master_addr, "pet-host");
  EXPECT_EQ(parse(pet).node_rank, 3);
  const LaunchOptions flags = parse(pet, {"--master-addr=flag-host", "--nnodes=2", "--node-rank=1"});
  EXPECT_EQ(flags.master_addr, "flag-host");
  EXPECT_EQ(flags.nnodes, 2);
  EXPECT_EQ(flags.node_rank, 1);
  // A job of one node in each task (a sweep with one job per node): nothing taken from the step.
  for (const auto& one : {std::vector<std::string>{"--standalone"}, std::vector<std::string>{"--nnodes=1"}}) {
    const LaunchOptions alone = parse(step, one);
    EXPECT_EQ(alone.nnodes, 1) << one[0];
    EXPECT_EQ(alone.node_rank, 0) << one[0];
    EXPECT_EQ(alone.master_addr, "127.0.0.1") << one[0];
  }
  Env batch_shell = step;  // sbatch's script: the job's variables, no step
  batch_shell.erase("SLURM_STEP_NUM_NODES");
  batch_shell.erase("SLURM_STEP_NODELIST");
  const LaunchOptions plain = parse(batch_shell);
  EXPECT_EQ(plain.nnodes, 1);
  EXPECT_EQ(plain.node_rank, 0);
  EXPECT_EQ(plain.master_addr, "127.0.0.1");
  Env bad = step;
  bad["SLURM_NODEID"] = "x";
  EXPECT_EQ(error_of([&] { parse(bad); }).rfind("environment variable SLURM_NODEID=\"x\": ", 0), 0u)
      << error_of([&] { parse(bad); });
  bad = step;
  bad["SLURM_STEP_NODELIST"] = "gpu[03-";
  EXPECT_EQ(error_of([&] { parse(bad); }).rfind("environment variable SLURM_STEP_NODELIST: ", 0), 0u)
      << error_of([&] { parse(bad); });
}

// One ddprun per "node" as `srun --ntasks-per-node=1 ddprun` starts them, told nothing on the command line but the
// program: Slurm's step variables give the node count, ranks and master, PET_MASTER_PORT the port. They train the
// model.pt of one 2-worker ddprun.
TEST(LauncherFlagEnvTest, TwoDdprunUnderSrunVariablesTrainTheOneNodeModel) {
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 128, 32, 1, {"data.batch_size=16", "model.name=net", "training.epochs=1"});
  const std::string port = std::to_string(free_port_pair());
  auto node = [&](int n) {
    return "env OMP_NUM_THREADS=1 SLURM_STEP_NUM_NODES=2 SLURM_NODEID=" + std::to_string(n) +
           " SLURM_STEP_NODELIST='localhost,node2' SLURM_JOB_ID=7 PET_MASTER_PORT=" + port + " " + ddprun_path() + " " +
           ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "slurm";
  };
  const TwoNodeResult r = run_two_nodes(dir, node(0), node(1));
  ASSERT_EQ(r.node0.exit_code, 0) << r.node0.output;
  ASSERT_EQ(r.node1.exit_code, 0) << r.node1.output;
  EXPECT_NE(r.node0.output.find("\n  rendezvous localhost:" + port + " (MASTER_ADDR)\n"), std::string::npos)
      << r.node0.output;
  const CommandResult one = run_command("OMP_NUM_THREADS=1 " + ddprun_path() + " --standalone --nproc-per-node 2 " +
                                        ddptrain_path() + " " + cfg + " --job.out_dir=" + dir / "one_node");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(max_state_diff(dir / "slurm/model.pt", dir / "one_node/model.pt"), 0.0);
}

}  // namespace
}  // namespace ddp::test
