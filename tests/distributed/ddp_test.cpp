// DDP end to end: bit-identical replicas, batch equivalence, PyTorch parity, sharded evaluation.
//
// Replicas stay bit-identical, 2 ranks x b == 1 rank x 2b (on the CPU and, as OnDevice/.../Cuda, on a GPU),
// agreement with PyTorch's own DDP, sharded evaluation equals single-process evaluation.
#include "base/number_text.h"
#include "distributed/process_group.h"
#include "distributed/reduce.h"
#include "tests/support/in_process_rank.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <filesystem>
#include <iostream>
#include <thread>

namespace ddp::test {
namespace {

// A config for the tiny MNIST-format set in `data`; extra lines are appended per section by overrides.
std::string tiny_config(const TempDir& dir, const std::string& data, const std::string& model = "net") {
  return write_mnist_job(dir, data,
                         {"job.out_dir=" + dir / "out", "job.seed=3", "data.batch_size=16", "data.eval_batch_size=7",
                          "model.name=" + model, "model.dropout=0.0", "optimizer.lr=0.05", "optimizer.momentum=0.9",
                          "metrics.log_every_steps=5"});
}

void expect_all_ok(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << " output:\n" << results[r].output;
}

using DdpOnDevice = OnDevice;

TEST_P(DdpOnDevice, ReplicasBitIdenticalAfterEveryStepNet) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 256, 64, 1);
  std::string cfg = tiny_config(dir, dir / "data");
  auto results = run_ranks(2, cfg + " --dist.check_replicas_every=1 --model.dropout=0.5" + device_flags(2));
  expect_all_ok(results);
  EXPECT_TRUE(std::filesystem::exists(dir / "out/model.pt"));
}

TEST_P(DdpOnDevice, ReplicasBitIdenticalAfterEveryStepResNetWithBuffers) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 48, 16, 2);
  std::string cfg = tiny_config(dir, dir / "data", "resnet18");
  auto results = run_ranks(2, cfg + " --dist.check_replicas_every=1 --data.batch_size=8" + device_flags(2));
  expect_all_ok(results);
}

// The replica check itself, on two ranks of one process (Gloo over a HashStore): rank 1's parameters are nudged,
// and both ranks stop with the same error; identical parameters pass.
TEST(DdpTest, ReplicaCheckDetectsDivergence) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string errors[2];
  auto rank = [&](int r, float nudge) {
    DistContext ctx = in_process_rank(store, r, 2);
    std::vector<torch::Tensor> params{torch::linspace(-1, 1, 12).view({4, 3}), torch::linspace(0, 2, 5)};
    check_replicas_identical(ctx, params, 1);  // identical: passes
    params[0].view(-1)[0].add_(nudge);
    try {
      check_replicas_identical(ctx, params, 2);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread other(rank, 1, 1e-3f);
  rank(0, 0.0f);
  other.join();
  for (int r : {0, 1}) {
    EXPECT_EQ(errors[r].rfind("replicas diverged after step 2: rank " + std::to_string(r) + " parameter digest ", 0),
              0u)
        << "rank " << r << ": " << errors[r];
  }
}

// Why 1e-5 after 16 steps of the Net (lr 0.05, momentum 0.9): DDP's average of the two ranks' gradients (each the
// mean over 16 samples, all-reduced and halved) and one rank's mean over 32 are the same sums grouped differently, so
// each step's gradients differ by float32 rounding alone, a few units of u = 2^-24 = 6e-8 of each entry (below 1
// here); the steps after carry such a difference on and can grow it (momentum, the loss's curvature). Measured on the
// CPU: 1.8e-7 on AVX2 and on the plain path, 56x under the bound. A gradient left unaveraged (2x) or one rank's batch
// dropped moves the weights by lr x |g| ~ 1e-2 in the first step, and another start (below) ends far away.
TEST_P(DdpOnDevice, TwoRanksTimesBatchEqualsOneRankTimesDoubleBatch) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 512, 32, 4);
  std::string cfg = tiny_config(dir, dir / "data");
  auto two = run_ranks(2, cfg + " --data.batch_size=16 --job.out_dir=" + dir / "two" + reproducible_device_flags(2));
  expect_all_ok(two);
  auto one = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg +
                         " --data.batch_size=32 --job.out_dir=" + dir / "one" + reproducible_device_flags(1));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const double diff = max_state_diff(dir / "two/model.pt", dir / "one/model.pt");
  report_figure(std::string("2 ranks x 16 vs 1 rank x 32 on ") + (on_cuda() ? "cuda" : "cpu") +
                    ", max abs diff after 16 steps",
                diff);
  EXPECT_LE(diff, 1e-5);
  // And the runs really trained: the same run started from other initial weights (job.seed = 4) ends far from this one.
  auto other = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg + " --data.batch_size=32 --job.seed=4" +
                           reproducible_device_flags(1) + " --job.out_dir=" + dir / "other");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_GT(max_state_diff(dir / "other/model.pt", dir / "one/model.pt"), 1e-2);
}

INSTANTIATE_ON_DEVICES(DdpOnDevice);

// model.sync_batchnorm: 2 ranks x 16 with SyncBatchNorm train ResNet-18 as 1 rank x 32 with plain BatchNorm does
// (weights and running statistics); without it each rank's BatchNorm sees its half and the run ends elsewhere.
// ResNet-18 on 28x28 images magnifies rounding at lr 0.05 (one run on 1 and on 2 threads differ by 7.6e-4 after
// two steps), so these runs take 3 steps at lr 0.001.
// The two sides compute the same sums in other orders (the statistics as per-rank moments merged over the ranks by
// batch_norm_gather_stats_with_counts against one pass over 32 samples, the weight gradients as two sums of 16
// samples all-reduced against one of 32), each with the CPU's own blocking (AVX-512, AVX2 or the plain path), and
// BatchNorm's backward subtracts nearly equal means, so the last bits of those sums grow through ResNet-18's 20
// layers into the first ones: after these 3 steps conv1.weight differs by 3.2e-5 on an AVX2 machine and by less than
// 1e-5 on an AVX-512 one. What SyncBatchNorm must get right is the statistics' batch: without it the run lands 0.1 of
// an entry's scale away. So the bound is the unsynchronised run's distance over 100: rounding of any machine lies
// orders of magnitude below it, a wrong batch far above.
TEST(DdpTest, SyncBatchNormTwoRanksOf16EqualOneRankOf32) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 192, 16, 7);
  std::string cfg = tiny_config(dir, dir / "data", "resnet18") + " --optimizer.lr=0.001 --training.max_steps=3";
  auto two = run_ranks(2, cfg + " --model.sync_batchnorm=true --data.batch_size=16 --job.out_dir=" + dir / "two");
  expect_all_ok(two);
  EXPECT_NE(two[0].output.find("sync_batchnorm on (20 BatchNorm layers, statistics over all 2 ranks)"),
            std::string::npos)
      << two[0].output;
  auto one = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + cfg +
                         " --data.batch_size=32 --job.out_dir=" + dir / "one");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("sync_batchnorm off (20 BatchNorm layers, statistics per rank)"), std::string::npos)
      << one.output;
  const double diff = max_state_diff(dir / "two/model.pt", dir / "one/model.pt");
  const ScaledStateDiff synced = largest_scaled_state_diff(dir / "two/model.pt", dir / "one/model.pt");
  auto unsynced = run_ranks(2, cfg + " --data.batch_size=16 --job.out_dir=" + dir / "unsynced");
  expect_all_ok(unsynced);
  const double unsynced_diff = max_state_diff(dir / "unsynced/model.pt", dir / "one/model.pt");
  EXPECT_GT(unsynced_diff, 1e-4);
  // The entry farthest from the one-rank run against its own scale: within the largest absolute difference.
  const ScaledStateDiff scaled = largest_scaled_state_diff(dir / "unsynced/model.pt", dir / "one/model.pt");
  EXPECT_LE(scaled.abs, unsynced_diff);
  EXPECT_GT(scaled.relative, 0.0) << scaled.name;
  EXPECT_LE(synced.relative, scaled.relative / 100) << synced.name << ": " << synced.abs << " of " << synced.scale;
  std::cout << "[ measured ] max |2 x 16 - 1 x 32|: SyncBatchNorm " << diff
            << " (against its scale: " << synced.relative << " in " << synced.name << "), BatchNorm per rank "
            << unsynced_diff
            << " (against its scale: " << scaled.relative << " in " << scaled.name << ")\n";
}

// model.sync_batchnorm against PyTorch's own SyncBatchNorm (convert_sync_batchnorm, DDP over Gloo with CUDA tensors,
// both ranks on one GPU). PyTorch runs SyncBatchNorm on accelerators only, so this comparison needs a GPU. Both sides
// run cuDNN's deterministic algorithms without TF32, ddptrain with every kernel tap (as PyTorch computes). ResNet-18 on
// these 28x28 images magnifies last-bit differences step by step: on an H200 3e-7 after one step (in a running
// variance) and 1.4e-4 after two (in layer2.1.conv1.weight, the same in two runs), which is what rounding alone does
// here (ddptrain on 1 and on 2 CPU threads: 7.6e-4 apart after two steps at 5x this lr, see above). BatchNorm per rank
// lands 0.17 away after two steps at lr 0.05. Each entry is measured against its own scale (running variances can lie
// far above 1).
TEST(CudaSyncBatchNorm, TwoRanksMatchPythonDdpWithConvertSyncBatchnorm) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  write_tiny_mnist(dir / "data", 192, 16, 7);
  const std::string script = source_dir() + "/tests/python/sync_batchnorm_reference.py";
  auto init = run_command(python() + " " + script + " make " + dir / "init.pt" + " --seed 11");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  for (const int steps : {1, 2}) {
    const std::string python_out = dir / ("python-" + std::to_string(steps) + ".pt");
    const std::string ours_out = dir / ("ours-" + std::to_string(steps));
    auto ref = run_python_ranks(2, script + " train --data " + dir / "data" + " --init " + dir / "init.pt" + " --out " +
                                       python_out + " --batch 16 --steps " + std::to_string(steps) +
                                       " --lr 0.01 --momentum 0.9 --seed 3");
    ASSERT_TRUE(std::filesystem::exists(python_out)) << ref.output;
    std::string cfg = tiny_config(dir, dir / "data", "resnet18");
    auto ours = run_ranks(2, cfg + " --model.sync_batchnorm=true --model.init_from=" + dir / "init.pt" +
                                 " --training.max_steps=" + std::to_string(steps) + " --job.out_dir=" + ours_out +
                                 " --optimizer.lr=0.01 --dist.device=cuda --dist.backend=gloo "
                                 "--model.memory_format=contiguous --model.skip_padding_taps=false "
                                 "--training.deterministic=true --training.cudnn_allow_tf32=false");
    expect_all_ok(ours);
    const ScaledStateDiff diff = largest_scaled_state_diff(ours_out + "/model.pt", python_out);
    report_figure("sync_batchnorm on cuda, 2 ranks vs Python DDP + SyncBatchNorm, max abs diff after " +
                      std::to_string(steps) + " steps",
                  max_state_diff(ours_out + "/model.pt", python_out));
    report_figure("sync_batchnorm on cuda, largest diff relative to its tensor's scale after " + std::to_string(steps) +
                      " steps (" + diff.name + ", " + number_text("%.3g", diff.abs) + " of " +
                      number_text("%.4g", diff.scale) + ")",
                  diff.relative);
    EXPECT_LE(diff.relative, steps == 1 ? 1e-5 : 5e-4) << steps << " steps, " << diff.name;
    EXPECT_GT(max_state_diff(dir / "init.pt", python_out), steps == 1 ? 1e-4 : 1e-3)
        << steps << " steps";  // it trained
  }
}

// PyTorch DDP + DistributedSampler on 2 ranks (tests/python/ddp_reference.py) from those weights: `steps` SGD steps
// of batch 16, lr 0.05 and momentum 0.9, seed 3; the model saved to `out`.
void python_ddp(const TempDir& dir, int steps, const std::string& out, const std::string& extra = "") {
  auto ref = run_python_ranks(2, source_dir() + "/tests/python/ddp_reference.py --data " + dir / "data" + " --init " +
                                     dir / "init.pt" + " --out " + out + " --steps " + std::to_string(steps) +
                                     " --batch 16 --lr 0.05 --momentum 0.9 --seed 3" + extra);
  ASSERT_TRUE(std::filesystem::exists(out)) << ref.output;
}

// Why 1e-4 in the two tests below: both sides run the same kernels on the same batches and all-reduce through c10d's
// Reducer; they differ by how each composes the same float32 arithmetic in the loss and the optimizer's update, a few
// units of u = 2^-24 per step, which the following steps carry on and grow (momentum 0.9 passes a difference on up to
// 10 times, and each gradient responds to the weights' difference). Measured: 1.5-3e-8 after 10 steps (weight decay
// groups), 2.2e-6 (plain path) and 2.8e-6 (AVX2) after 20 steps across an epoch; 1e-4 is 36x the larger. A step
// missing, another sample order or an unaveraged gradient moves weights by 1e-3 to 1e-1.
TEST(DdpTest, MatchesPythonDdpAfter20MomentumSteps) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_data_and_net_init(dir));
  ASSERT_NO_FATAL_FAILURE(python_ddp(dir, 20, dir / "python.pt"));  // crosses an epoch

  std::string cfg = tiny_config(dir, dir / "data");
  auto ours =
      run_ranks(2, cfg + " --model.init_from=" + dir / "init.pt" + " --training.max_steps=20 --training.epochs=5");
  expect_all_ok(ours);
  const double diff = max_state_diff(dir / "out/model.pt", dir / "python.pt");
  report_figure("2 ranks vs Python DDP, max abs diff after 20 momentum steps", diff);
  EXPECT_LE(diff, 1e-4);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // training moved the weights
}

// optimizer.norm_weight_decay = 0 and bias_weight_decay = 0 against Python DDP with SGD over the param groups
// torchvision's set_weight_decay makes: Net's weights with weight decay 0.1, its biases without.
TEST(DdpTest, WeightDecayParamGroupsMatchPythonDdp) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_data_and_net_init(dir));
  ASSERT_NO_FATAL_FAILURE(
      python_ddp(dir, 10, dir / "python.pt", " --weight-decay 0.1 --norm-weight-decay 0 --bias-weight-decay 0"));
  auto ours = run_ranks(2, tiny_config(dir, dir / "data") + " --model.init_from=" + dir / "init.pt" +
                               " --training.max_steps=10 --optimizer.weight_decay=0.1 "
                               "--optimizer.norm_weight_decay=0 --optimizer.bias_weight_decay=0");
  expect_all_ok(ours);
  const double diff = max_state_diff(dir / "out/model.pt", dir / "python.pt");
  report_figure("weight decay param groups, 2 ranks vs Python DDP, max abs diff after 10 steps", diff);
  EXPECT_LE(diff, 1e-4);
  EXPECT_GT(max_state_diff(dir / "init.pt", dir / "python.pt"), 1e-3);  // training moved the weights
}

// dist.grad_compression against PyTorch's own hooks: Python DDP with fp16_compress_hook or bf16_compress_hook
// registered; bf16 under static_graph on both sides (whose first step runs the hook on every bucket once backward
// is done). Convolutions as PyTorch runs them (contiguous, every tap), so that only the hooks could differ.
TEST(DdpTest, GradCompressionMatchesPythonDdpWithTheCompressHook) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(write_data_and_net_init(dir));
  const std::string cfg = tiny_config(dir, dir / "data") + " --model.init_from=" + dir / "init.pt" +
                          " --training.max_steps=10 --model.memory_format=contiguous --model.skip_padding_taps=false";
  for (const std::string compression : {"fp16", "bf16"}) {
    const bool static_graph = compression == "bf16";
    SCOPED_TRACE(compression + (static_graph ? " under static_graph" : ""));
    const std::string python_out = dir / ("python-" + compression + ".pt"), ours_out = dir / ("out-" + compression);
    ASSERT_NO_FATAL_FAILURE(python_ddp(dir, 10, python_out,
                                       " --compress " + compression + " --static-graph " + (static_graph ? "1" : "0")));
    auto ours = run_ranks(2, cfg + " --dist.grad_compression=" + compression + " --job.out_dir=" + ours_out +
                                 " --dist.static_graph=" + (static_graph ? "true" : "false"));
    expect_all_ok(ours);
    const double diff = max_state_diff(ours_out + "/model.pt", python_out);
    report_figure("grad_compression " + compression + (static_graph ? " (static_graph)" : "") +
                      ", 2 ranks vs Python DDP with its hook, max abs diff after 10 steps",
                  diff);
    EXPECT_EQ(diff, 0.0);
  }
  // The two hooks train different weights, so matching one of them is matching its cast.
  EXPECT_GT(max_state_diff(dir / "python-fp16.pt", dir / "python-bf16.pt"), 0.0);
}

TEST(DdpTest, ShardedEvaluationEqualsSingleProcess) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 64, 101, 6);
  std::string cfg = tiny_config(dir, dir / "data");
  // Weights to evaluate: a short single-process run.
  auto base = run_command(ddptrain_path() + " " + cfg + " --training.max_steps=3 --job.out_dir=" + dir / "base");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  auto eval_record = [&](const std::string& out_dir) {
    auto lines = read_lines(out_dir + "/metrics.jsonl");
    EXPECT_FALSE(lines.empty());
    return lines.empty() ? std::string() : lines.back();
  };
  std::string args = cfg + " --eval-only --model.init_from=" + dir / "base/model.pt";
  auto one = run_command(ddptrain_path() + " " + args + " --job.out_dir=" + dir / "e1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string expected = eval_record(dir / "e1");
  ASSERT_NE(expected.find("\"total\":101"), std::string::npos) << expected;
  ASSERT_NE(expected.find("\"correct_top5\":"), std::string::npos) << expected;  // 10 classes
  {  // Into the trained run's own folder: its records stay, the eval record follows them (an unfinished last line,
     // which a killed run leaves, dropped).
    const auto trained = read_lines(dir / "base/metrics.jsonl");
    ASSERT_FALSE(trained.empty());
    write_file(dir / "base/metrics.jsonl", read_file(dir / "base/metrics.jsonl") + "{\"kind\":\"train\",\"st");
    const CommandResult again = run_command(ddptrain_path() + " " + args + " --job.out_dir=" + dir / "base");
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const auto after = read_lines(dir / "base/metrics.jsonl");
    ASSERT_EQ(after.size(), trained.size() + 1);
    EXPECT_TRUE(std::equal(trained.begin(), trained.end(), after.begin()));
    EXPECT_NE(after.back().find("\"total\":101"), std::string::npos) << after.back();
    EXPECT_EQ(count_of(after.back(), "\"kind\""), 1u) << after.back();
  }
  for (int world : {2, 3}) {
    auto results = run_ranks(world, args + " --job.out_dir=" + dir / ("e" + std::to_string(world)));
    expect_all_ok(results);
    std::string got = eval_record(dir / ("e" + std::to_string(world)));
    auto field = [](const std::string& rec, const std::string& key) {
      size_t p = rec.find("\"" + key + "\":");
      return p == std::string::npos ? std::string() : rec.substr(p, rec.find(',', p) - p);
    };
    EXPECT_EQ(field(got, "correct"), field(expected, "correct")) << "world " << world;
    EXPECT_EQ(field(got, "total"), field(expected, "total")) << "world " << world;
    EXPECT_EQ(field(got, "accuracy"), field(expected, "accuracy")) << "world " << world;
    EXPECT_EQ(field(got, "correct_top5"), field(expected, "correct_top5")) << "world " << world;
    EXPECT_EQ(field(got, "accuracy_top5"), field(expected, "accuracy_top5")) << "world " << world;
  }
}

}  // namespace
}  // namespace ddp::test
