// training.cuda_graph: replays of the captured step equal eager steps bit for bit (GPU; the CPU side's refusals are
// config tests), through an fp16 overflow skip, the learning-rate schedule, partial last batches and a resume.
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

namespace ddp::test {
namespace {

// The tiny MNIST-format set: 600 training images in batches of 64 leave a partial last batch of 24 in each epoch (run
// eagerly between replays). Warmup then cosine, a checkpoint every 7 steps, deterministic cuDNN.
std::string graph_job(const TempDir& dir, const std::string& out, const std::string& extra) {
  return write_tiny_job(dir, 600, 100, 31,
                        {"job.seed=5", "data.batch_size=64", "model.dropout=0.0", "optimizer.lr=0.05",
                         "optimizer.momentum=0.9", "optimizer.fused=true", "lr_scheduler.warmup_steps=5",
                         "lr_scheduler.decay=cosine", "training.epochs=3", "training.deterministic=true",
                         "checkpoint.every_steps=7", "metrics.log_every_steps=5", "metrics.progress=plain"}) +
         " --dist.device=cuda --job.out_dir=" + out + " " + extra;
}

// The "loss" of every train record, in order.
std::vector<std::string> logged_losses(const std::string& metrics) {
  std::vector<std::string> out;
  const std::regex loss(R"re("kind":"train".*?"loss":([^,]+),)re");
  for (const std::string& line : read_lines(metrics)) {
    std::smatch m;
    if (std::regex_search(line, m, loss)) out.push_back(m[1]);
  }
  return out;
}

void expect_graph_equals_eager(const std::string& amp) {
  TempDir dir;
  const auto eager = run_command(ddptrain_path() + " " + graph_job(dir, dir / "eager", amp));
  ASSERT_EQ(eager.exit_code, 0) << eager.output;
  const auto graph =
      run_command(ddptrain_path() + " " + graph_job(dir, dir / "graph", amp + " --training.cuda_graph=true"));
  ASSERT_EQ(graph.exit_code, 0) << graph.output;
  EXPECT_EQ(max_state_diff(dir / "eager/model.pt", dir / "graph/model.pt"), 0.0);
  // Cut at step 12 (its checkpoint at 7 and the final one at 12), then resumed to the end: the same weights.
  const auto cut =
      run_command(ddptrain_path() + " " +
                  graph_job(dir, dir / "resumed", amp + " --training.cuda_graph=true --training.max_steps=12"));
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const auto resumed =
      run_command(ddptrain_path() + " " + graph_job(dir, dir / "resumed", amp + " --training.cuda_graph=true"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(max_state_diff(dir / "eager/model.pt", dir / "resumed/model.pt"), 0.0);
  // The logged losses too: the replays' figures are summed on the device as the eager steps' are on the host.
  EXPECT_EQ(logged_losses(dir / "graph/metrics.jsonl"), logged_losses(dir / "eager/metrics.jsonl"));
}

// fp16 with dynamic loss scaling from a scale that overflows: the first steps are skipped inside the graph (fused
// SGD takes found_inf) and the scale backs off on the device, as in the eager steps.
TEST(CudaGraph, Fp16ReplaysEqualEagerStepsBitForBit) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  expect_graph_equals_eager("--amp.enabled=true --amp.dtype=float16 --amp.init_scale=3.4e38");
}

// float32 without a loss scaler: the non-finite check runs in the graph and is read a step late.
TEST(CudaGraph, Fp32ReplaysEqualEagerStepsBitForBit) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  expect_graph_equals_eager("--training.cudnn_allow_tf32=false");
}

// Where the config allows a graph but the machine does not (no GPU for dist.device = "auto"): one error line.
TEST(GraphStep, WithoutAGpuTheRunStopsSayingWhy) {
  if (why_no_gpu().empty()) GTEST_SKIP() << "a GPU is visible: dist.device = \"auto\" trains on it";
  TempDir dir;
  const auto r = run_command(ddptrain_path() + " " + graph_job(dir, dir / "out", "--training.cuda_graph=true") +
                             " --dist.device=auto");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: training.cuda_graph needs a CUDA"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/model.pt"));
}

}  // namespace
}  // namespace ddp::test
