// checkpoint.replicas: with the job spread over nodes (LOCAL_WORLD_SIZE < WORLD_SIZE), every node's LOCAL_RANK 0
// writes the same checkpoint into its own checkpoint.dir, so a restart that puts rank 0 on another node resumes; a
// folder the nodes share is written by rank 0 alone. Two "nodes" here are two ranks of one LOCAL_RANK 0 each, started
// in two working directories with job.out_dir = "run" (node-local disks).
#include "tests/checkpoint/resume_job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// The prefix that runs rank `node` as the only rank of node `node`, in the working directory `cwd`.
std::string on_node(int node, const std::string& cwd) {
  fs::create_directories(cwd);
  return "env -C " + shell_quote(cwd) + " LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=" + std::to_string(node);
}

std::vector<std::string> checkpoint_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pt") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CheckpointReplicas, EveryNodeHoldsTheSameCopyAndRankZeroOnAnotherNodeResumesFromIt) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --model.dropout=0.0 --job.out_dir=run";
  // Uninterrupted: 8 steps on two nodes.
  auto full = run_ranks(2, cfg + " --training.max_steps=8", "", 1, "",
                        {on_node(0, dir / "full_a"), on_node(1, dir / "full_b")});
  for (const auto& r : full) ASSERT_EQ(r.exit_code, 0) << r.output;
  // Nodes a and b train 4 steps (checkpoints at 4): both hold it, byte for byte.
  auto first = run_ranks(2, cfg + " --training.max_steps=4", "", 1, "", {on_node(0, dir / "a"), on_node(1, dir / "b")});
  for (const auto& r : first) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(first[0].output.find("checkpoints in a copy in each of 2 nodes' checkpoint.dir (checkpoint.replicas = "
                                 "\"auto\")"),
            std::string::npos)
      << first[0].output;
  const std::vector<std::string> on_a = checkpoint_files(dir / "a/run/checkpoints");
  ASSERT_FALSE(on_a.empty());
  EXPECT_EQ(on_a, checkpoint_files(dir / "b/run/checkpoints"));
  for (const std::string& f : on_a)
    EXPECT_TRUE(ckpt_same_bytes(dir / ("a/run/checkpoints/" + f), dir / ("b/run/checkpoints/" + f))) << f;
  // Node a is lost: the job starts again on b (now rank 0) and a new node c. It resumes at step 4 and ends as the
  // uninterrupted run did; c holds a copy of the step-8 checkpoint.
  auto second =
      run_ranks(2, cfg + " --training.max_steps=8", "", 1, "", {on_node(0, dir / "b"), on_node(1, dir / "c")});
  for (const auto& r : second) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(second[0].output.find("at step 4"), std::string::npos) << second[0].output;
  EXPECT_TRUE(ckpt_same_bytes(dir / "full_a/run/model.pt", dir / "b/run/model.pt"))
      << "max diff " << max_state_diff(dir / "full_a/run/model.pt", dir / "b/run/model.pt");
  const std::vector<std::string> on_c = checkpoint_files(dir / "c/run/checkpoints");
  ASSERT_FALSE(on_c.empty());
  EXPECT_TRUE(ckpt_same_bytes(dir / ("b/run/checkpoints/" + on_c.back()), dir / ("c/run/checkpoints/" + on_c.back())));
}

TEST(CheckpointReplicas, Rank0KeepsTheCheckpointsOnRankZerosNodeAlone) {
  TempDir dir;
  const std::string cfg =
      ckpt_job_config(dir) + " --job.out_dir=run --training.max_steps=4 --checkpoint.replicas=rank0";
  auto ranks = run_ranks(2, cfg, "", 1, "", {on_node(0, dir / "a"), on_node(1, dir / "b")});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("checkpoints in rank 0's checkpoint.dir"), std::string::npos) << ranks[0].output;
  EXPECT_FALSE(checkpoint_files(dir / "a/run/checkpoints").empty());
  EXPECT_TRUE(checkpoint_files(dir / "b/run/checkpoints").empty());
}

// Two nodes whose checkpoint.dir is one folder (a shared filesystem): the writers see each other's marker, say so,
// and rank 0 alone writes; the run's checkpoints are whole.
TEST(CheckpointReplicas, AFolderTheNodesShareIsWrittenByRankZeroAlone) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --job.out_dir=" + dir / "shared" + " --training.max_steps=8";
  auto ranks = run_ranks(2, cfg, "", 1, "", {on_node(0, dir / "a"), on_node(1, dir / "b")});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("is one shared folder (rank 1's node sees it too), so rank 0 alone writes"),
            std::string::npos)
      << ranks[0].output;
  EXPECT_EQ(checkpoint_files(dir / "shared/checkpoints"),
            (std::vector<std::string>{"step-00000004.pt", "step-00000008.pt"}));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "shared/checkpoints", ec))
    EXPECT_NE(e.path().filename().string().rfind(".writer-", 0), 0u) << "marker left: " << e.path();
}

}  // namespace
}  // namespace ddp::test
