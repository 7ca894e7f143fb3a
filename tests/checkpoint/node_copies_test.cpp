// checkpoint.replicas: with the job spread over nodes (LOCAL_WORLD_SIZE < WORLD_SIZE), every node's LOCAL_RANK 0
// writes the same checkpoint into its own checkpoint.dir, and a restart resumes from the newest usable copy any node
// holds, wherever rank 0 now is; nodes that lack it get it; two different checkpoints of that step are an error; a
// folder the nodes share is written by rank 0 alone; the bytes reach the nodes' writers only. Two "nodes" here are two
// ranks of one LOCAL_RANK 0 each, started in two working directories with job.out_dir = "run" (node-local disks).
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/checkpointer.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "tests/checkpoint/resume_job.h"
#include "tests/support/counting_backend.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ddp::test {
namespace {

namespace fs = std::filesystem;

// The job trained to `max_steps` with rank 0 on node 0 in working directory `a` and rank 1 on node 1 in `b`; every rank
// is expected to exit 0.
std::vector<RankResult> train_on_nodes(const std::string& cfg, int max_steps, const std::string& a,
                                       const std::string& b) {
  auto ranks = run_ranks(2, cfg + " --training.max_steps=" + std::to_string(max_steps), "", 1, "",
                         {on_node(0, a), on_node(1, b)});
  for (const auto& r : ranks) EXPECT_EQ(r.exit_code, 0) << r.output;
  return ranks;
}

std::vector<std::string> checkpoint_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pt") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Node a is lost after both nodes hold the step-4 checkpoint; the job starts again on node b and a new node c, in
// either order (the rendezvous numbers nodes as they join). Both resume at step 4 from b's copy, write it to c, and
// end as the uninterrupted run did.
TEST(CheckpointReplicas, EveryNodeHoldsTheSameCopyAndEitherOrderOfNodeLossResumesFromIt) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --model.dropout=0.0 --job.out_dir=run";
  train_on_nodes(cfg, 8, dir / "full_a", dir / "full_b");
  const auto first = train_on_nodes(cfg, 4, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(first[0].output.find("checkpoints in a copy in each of 2 nodes' checkpoint.dir (checkpoint.replicas = "
                                 "\"auto\")"),
            std::string::npos)
      << first[0].output;
  const std::vector<std::string> on_a = checkpoint_files(dir / "a/run/checkpoints");
  ASSERT_FALSE(on_a.empty());
  EXPECT_EQ(on_a, checkpoint_files(dir / "b/run/checkpoints"));
  for (const std::string& f : on_a)
    EXPECT_TRUE(ckpt_same_bytes(dir / ("a/run/checkpoints/" + f), dir / ("b/run/checkpoints/" + f))) << f;
  fs::copy(dir / "b", dir / "b_again", fs::copy_options::recursive);
  for (const auto& [rank0, rank1] : {std::pair<std::string, std::string>{"b", "c"}, {"c_again", "b_again"}}) {
    SCOPED_TRACE("rank 0 on " + rank0 + ", rank 1 on " + rank1);
    const auto second = train_on_nodes(cfg, 8, dir / rank0, dir / rank1);
    ASSERT_FALSE(HasFailure());
    const std::string holder = rank0 == "b" ? "(rank 0's node)" : "(rank 1's node)";
    EXPECT_NE(second[0].output.find("resumed from run/checkpoints/step-00000004.pt on host "), std::string::npos)
        << second[0].output;
    EXPECT_NE(second[0].output.find(holder + " at step 4"), std::string::npos) << second[0].output;
    EXPECT_NE(second[0].output.find("wrote the checkpoint of step 4 to 1 node that lacked it"), std::string::npos)
        << second[0].output;
    const std::string b = dir / (rank0 == "b" ? rank0 : rank1), c = dir / (rank0 == "b" ? rank1 : rank0);
    const std::string model = dir / (rank0 + "/run/model.pt");  // rank 0 writes it
    EXPECT_TRUE(ckpt_same_bytes(model, dir / "full_a/run/model.pt"))
        << "max diff " << max_state_diff(dir / "full_a/run/model.pt", model);
    EXPECT_EQ(checkpoint_files(c + "/run/checkpoints"), checkpoint_files(b + "/run/checkpoints"));
    for (const std::string& f : checkpoint_files(b + "/run/checkpoints"))
      EXPECT_TRUE(ckpt_same_bytes(b + "/run/checkpoints/" + f, c + "/run/checkpoints/" + f)) << f;
  }
}

// Node a's newest copy (step 4) is corrupt, so its newest usable one is older (step 2); node b's step 4 is whole. The
// job resumes at step 4 from b, and a's corrupt file is moved aside (never deleted) for the good copy. Each node's
// crash debris is removed by its own writer, and the removal said.
TEST(CheckpointReplicas, ANodeWhoseNewestCopyIsCorruptGetsTheNewestValidOneFromAnother) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --job.out_dir=run --checkpoint.every_steps=2";
  train_on_nodes(cfg, 4, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  const std::string corrupt = dir / "a/run/checkpoints/step-00000004.pt";
  const std::string before = read_file(corrupt);
  fs::resize_file(corrupt, fs::file_size(corrupt) / 2);
  // What interrupted writes left on each node: each node's writer removes its own and says so, rank 1 on its output.
  write_file(dir / "a/run/checkpoints/latest.json.tmp-5", "{");
  write_file(dir / "b/run/checkpoints/step-00000006.pt.tmp-77", "partial");
  const auto second = train_on_nodes(cfg, 6, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(second[0].output.find("removed run/checkpoints/latest.json.tmp-5 (left by an interrupted write)"),
            std::string::npos)
      << second[0].output;
  EXPECT_NE(second[1].output.find(
                "rank 1's node: removed run/checkpoints/step-00000006.pt.tmp-77 (left by an interrupted write)"),
            std::string::npos)
      << second[1].output;
  EXPECT_FALSE(fs::exists(dir / "a/run/checkpoints/latest.json.tmp-5"));
  EXPECT_FALSE(fs::exists(dir / "b/run/checkpoints/step-00000006.pt.tmp-77"));
  EXPECT_NE(second[0].output.find("skipping corrupt checkpoint: run/checkpoints/step-00000004.pt"), std::string::npos)
      << second[0].output;
  EXPECT_NE(second[0].output.find("(rank 1's node) at step 4"), std::string::npos) << second[0].output;
  EXPECT_TRUE(read_file(corrupt) == before) << "the copy written in place of the corrupt one differs from b's";
  EXPECT_EQ(fs::file_size(dir / "a/run/checkpoints/displaced-1-step-00000004.pt"), fs::file_size(corrupt) / 2);
  for (const std::string& f : checkpoint_files(dir / "b/run/checkpoints"))
    EXPECT_TRUE(ckpt_same_bytes(dir / ("a/run/checkpoints/" + f), dir / ("b/run/checkpoints/" + f))) << f;
}

// Both nodes lost the files of steps 4 and 6 that their latest.json names (the folders' manifests and payloads gone):
// one line for the job names the node and the steps, and the job resumes from step 2, the newest a node holds, instead
// of a warning per step and node. With no step left on either node, the same line says the job starts from step 0.
TEST(CheckpointReplicas, StepsOfTheLineThatNoNodeHoldsAreSaidInOneLine) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --job.out_dir=run --checkpoint.every_steps=2";
  train_on_nodes(cfg, 6, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  const auto remove_steps = [&](const std::vector<std::string>& steps) {
    for (const std::string node : {"a", "b"})
      for (const std::string& step : steps)
        for (const std::string ext : {".pt", ".json"})
          ASSERT_TRUE(fs::remove(dir / (node + "/run/checkpoints/step-0000000" + step + ext))) << node << " " << step;
  };
  remove_steps({"4", "6"});
  const auto second = train_on_nodes(cfg, 6, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(second[0].output.find("run/checkpoints/latest.json on host "), std::string::npos) << second[0].output;
  EXPECT_NE(second[0].output.find("(rank 0's node) names steps 4 and 6, which no node holds usable: resuming from "
                                  "step 2"),
            std::string::npos)
      << second[0].output;
  EXPECT_NE(second[0].output.find("at step 2"), std::string::npos) << second[0].output;
  for (const auto& r : second) EXPECT_EQ(count_of(r.output, "is missing"), 0u) << r.output;
  EXPECT_EQ(count_of(second[0].output, "which no node holds usable"), 1u) << second[0].output;

  remove_steps({"2", "4", "6"});
  const auto third = train_on_nodes(cfg, 2, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(third[0].output.find("(rank 0's node) names steps 2, 4 and 6, which no node holds usable: starting from "
                                 "step 0"),
            std::string::npos)
      << third[0].output;
  EXPECT_EQ(third[0].output.find("resumed from"), std::string::npos) << third[0].output;
}

// Two nodes hold different checkpoints of the newest step (here node b's folder holds another run's line): an error
// on every rank that names both copies and their nodes, and nothing is overwritten.
TEST(CheckpointReplicas, TwoDifferentCheckpointsOfTheNewestStepAreAnErrorNamingBoth) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --job.out_dir=run";
  train_on_nodes(cfg, 4, dir / "a", dir / "b");
  ASSERT_FALSE(HasFailure());
  const CommandResult other = ckpt_train(cfg, "--training.max_steps=4 --job.seed=22 --job.out_dir=" + dir / "other");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  fs::remove_all(dir / "b/run/checkpoints");
  fs::copy(dir / "other/checkpoints", dir / "b/run/checkpoints");
  const std::string on_a = read_file(dir / "a/run/checkpoints/step-00000004.pt");
  auto second =
      run_ranks(2, cfg + " --training.max_steps=8", "", 1, "", {on_node(0, dir / "a"), on_node(1, dir / "b")});
  for (const auto& r : second) EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string& out = second[0].output;
  const size_t at = out.find("error: two different checkpoints of step 4: ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_NE(line.find("(rank 0's node)"), std::string::npos) << line;
  EXPECT_NE(line.find("(rank 1's node)"), std::string::npos) << line;
  EXPECT_NE(line.find("run/checkpoints/step-00000004.pt on host "), std::string::npos) << line;
  EXPECT_TRUE(read_file(dir / "a/run/checkpoints/step-00000004.pt") == on_a) << "node a's checkpoint was rewritten";
  EXPECT_EQ(checkpoint_files(dir / "a/run/checkpoints"), (std::vector<std::string>{"step-00000004.pt"}));
}

// Node b's disk is full when the step-8 checkpoint is written there (ENOSPC from the fault shim). on_error = fail:
// every rank stops, rank 0's error names rank 1's node, rank 1's the cause; node b keeps its step-4 copy whole.
// on_error = warn: the run goes on and ends; node a holds step 8, node b still its whole step 4 and no partial file.
TEST(CheckpointReplicas, ADiskFullOnOneNodeFollowsOnError) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --job.out_dir=run --training.max_steps=8";
  const std::string full_disk = fault_env("write", "step-00000008.pt.tmp", "enospc");
  for (const std::string on_error : {"fail", "warn"}) {
    SCOPED_TRACE("checkpoint.on_error = " + on_error);
    const std::string a = dir / (on_error + "_a"), b = dir / (on_error + "_b");
    auto ranks = run_ranks(2, cfg + " --checkpoint.on_error=" + on_error, "", 1, "",
                           {on_node(0, a), on_node(1, b) + " " + full_disk});
    const std::string& out = ranks[0].output;
    if (on_error == "fail") {
      for (const auto& r : ranks) EXPECT_NE(r.exit_code, 0) << r.output;
      EXPECT_NE(out.find("error: checkpoint at step 8 failed on rank 1's node (see that rank's output)"),
                std::string::npos)
          << out;
      EXPECT_NE(ranks[1].output.find("No space left on device"), std::string::npos) << ranks[1].output;
    } else {
      for (const auto& r : ranks) EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(out.find("warning: checkpoint at step 8 failed on rank 1's node (see that rank's output)"),
                std::string::npos)
          << out;
      EXPECT_NE(ranks[1].output.find("No space left on device"), std::string::npos) << ranks[1].output;
      EXPECT_EQ(checkpoint_files(a + "/run/checkpoints"),
                (std::vector<std::string>{"step-00000004.pt", "step-00000008.pt"}));
    }
    EXPECT_EQ(checkpoint_files(b + "/run/checkpoints"), std::vector<std::string>{"step-00000004.pt"});
    EXPECT_TRUE(ckpt_same_bytes(a + "/run/checkpoints/step-00000004.pt", b + "/run/checkpoints/step-00000004.pt"));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(b + "/run/checkpoints", ec))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "partial file left: " << e.path();
  }
}

// Node b, whose only process is rank 1, is killed (SIGKILL) in the middle of its writer's background write of the
// step-4 checkpoint. Rank 0 stops with an error instead of waiting for it; node b's newest complete checkpoint is
// still step 2's (what it was writing is a partial temp file); the job started again on both nodes resumes from the
// newest complete copy either node holds, and ends as the uninterrupted run did.
TEST(CheckpointReplicas, ANodeKilledInsideItsBackgroundWriteKeepsItsPreviousCopyAndTheJobResumesFromTheNewest) {
  TempDir dir;
  const std::string cfg = ckpt_job_config(dir) + " --model.dropout=0.0 --job.out_dir=run --checkpoint.every_steps=2";
  train_on_nodes(cfg, 8, dir / "full_a", dir / "full_b");
  const std::string a = dir / "a", b = dir / "b";
  auto killed = run_ranks(2, cfg + " --training.max_steps=8", "", 1, "",
                          {on_node(0, a), on_node(1, b) + " " + fault_env("write", "step-00000004.pt.tmp-", "kill")});
  EXPECT_EQ(killed[1].exit_code, 128 + 9) << killed[1].output;
  EXPECT_NE(killed[0].exit_code, 0) << killed[0].output;
  EXPECT_NE(killed[0].output.find("error: "), std::string::npos) << killed[0].output;
  // Node b: step 2 whole, step 4 never complete (no manifest); the newest complete step of either node.
  EXPECT_TRUE(fs::exists(CheckpointStore(b + "/run/checkpoints", 0, 0).manifest_path(2)));
  EXPECT_FALSE(fs::exists(CheckpointStore(b + "/run/checkpoints", 0, 0).manifest_path(4)));
  int64_t newest = 0;
  for (const std::string& node : {a, b}) {
    const std::vector<CheckpointInfo> complete = CheckpointStore(node + "/run/checkpoints", 0, 0).list();
    if (!complete.empty()) newest = std::max(newest, complete.front().step);
  }
  ASSERT_GE(newest, 2);
  const auto again = train_on_nodes(cfg, 8, a, b);
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(again[0].output.find("resumed from " + CheckpointStore("run/checkpoints", 0, 0).payload_path(newest)),
            std::string::npos)
      << again[0].output;
  EXPECT_TRUE(ckpt_same_bytes(a + "/run/model.pt", dir / "full_a/run/model.pt"))
      << "max diff " << max_state_diff(dir / "full_a/run/model.pt", a + "/run/model.pt");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(b + "/run/checkpoints", ec))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "partial file left: " << e.path();
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

// Four in-process ranks (threads) as two nodes of two: the checkpoint's bytes go from rank 0 to the other node's
// writer over the writers' own group, so no rank's share of the job's group carries them (the job's group counts
// each broadcast tensor's bytes); both nodes' folders hold the same file.
TEST(CheckpointReplicas, OnlyTheNodesWritersReceiveTheCheckpointsBytes) {
  TempDir dir;
  const int port = free_port();
  constexpr int kWorld = 4;
  const torch::Tensor weights = torch::arange(1 << 16, torch::kFloat32);  // 256 KiB of state
  std::vector<int64_t> job_group_bytes(kWorld, -1);
  std::vector<std::string> errors(kWorld);
  auto rank_main = [&](int rank) {
    try {
      const int node = rank / 2;
      RendezvousInfo info = rendezvous_from_env({{"RANK", std::to_string(rank)},
                                                 {"WORLD_SIZE", std::to_string(kWorld)},
                                                 {"LOCAL_RANK", std::to_string(rank % 2)},
                                                 {"LOCAL_WORLD_SIZE", "2"},
                                                 {"GROUP_RANK", std::to_string(node)},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(port)}});
      DistContext ctx = init_distributed(info, DistConfig{});
      auto counting = c10::make_intrusive<CountingBackend>(ctx.group->getBackend(c10::DeviceType::CPU));
      ctx.group = with_cpu_backend(ctx.group, counting);
      CheckpointConfig cfg;
      cfg.every_steps = 4;
      cfg.async = false;
      cfg.replicas = CheckpointReplicas::Node;
      cfg.dir = dir / ("node" + std::to_string(node) + "/checkpoints");
      Checkpointer checkpointer(
          cfg, dir / ("node" + std::to_string(node)), ctx, [](const std::string&) {}, [](const std::string&) {});
      c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
      state.insert("weights", weights);
      checkpointer.save([&] { return state; }, 4, 0, -1);
      checkpointer.settle();
      job_group_bytes[static_cast<size_t>(rank)] = counting->broadcast_bytes.load();
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) ranks.emplace_back(rank_main, r);
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  const CheckpointStore node0(dir / "node0/checkpoints", 3, 0), node1(dir / "node1/checkpoints", 3, 0);
  ASSERT_TRUE(fs::exists(node0.payload_path(4)));
  ASSERT_GT(fs::file_size(node0.payload_path(4)), 1u << 18);
  EXPECT_EQ(read_file(node0.payload_path(4)), read_file(node1.payload_path(4)));
  // What the job's group broadcast on each rank: the writers' marker nonce and its size, a few dozen bytes.
  for (int r = 0; r < kWorld; ++r) EXPECT_LT(job_group_bytes[static_cast<size_t>(r)], 1024) << "rank " << r;
}

}  // namespace
}  // namespace ddp::test
