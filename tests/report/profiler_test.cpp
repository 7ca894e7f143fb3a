// profile.start_step / profile.steps: each rank writes a Chrome trace of the chosen steps from LibTorch's profiler,
// holding ddptrain's phase ranges, the forward's and backward's operators and DDP's all-reduce.
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace ddp::test {
namespace {

// `python -c` over a trace file: the count of complete events ("ph": "X") whose name is `name` (or contains it,
// with a trailing '*').
int count_events(const std::string& trace, const std::string& name) {
  const std::string code =
      "import json, sys; events = json.load(open(sys.argv[1]))['traceEvents']; n = sys.argv[2]; "
      "match = (lambda e: n[:-1] in e) if n.endswith('*') else (lambda e: e == n); "
      "print(sum(1 for e in events if e.get('ph') == 'X' and match(e.get('name', ''))))";
  const CommandResult r =
      run_command(python() + " -c " + shell_quote(code) + " " + shell_quote(trace) + " " + shell_quote(name));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? std::stoi(r.output) : -1;
}

TEST(Profiler, TwoRanksWriteATraceOfTheChosenStepsWithPhasesOperatorsAndAllReduce) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 256, 32, 3,
                                         {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.max_steps=6",
                                          "profile.start_step=3", "profile.steps=2", "metrics.progress=plain"});
  const auto ranks = run_ranks(2, cfg);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("profile: steps 3-4 traced into " + dir / "out/profile/rank0.json"), std::string::npos)
      << ranks[0].output;
  for (int rank : {0, 1}) {
    const std::string trace = dir / ("out/profile/rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(std::filesystem::exists(trace)) << trace;
    // Two steps: two of each phase (the data wait of step 3 included), nothing of steps 1-2 or 5-6.
    EXPECT_EQ(count_events(trace, "ddptrain::data"), 2) << trace;
    EXPECT_EQ(count_events(trace, "ddptrain::forward"), 2) << trace;
    EXPECT_EQ(count_events(trace, "ddptrain::backward"), 2) << trace;
    EXPECT_EQ(count_events(trace, "ddptrain::optimizer"), 2) << trace;
    EXPECT_GE(count_events(trace, "aten::conv2d"), 4) << trace;           // Net: 2 convolutions a forward
    EXPECT_GE(count_events(trace, "ConvolutionBackward0*"), 4) << trace;  // and their backward
    EXPECT_GE(count_events(trace, "allreduce*"), 2) << trace;             // DDP's buckets
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out/profile/rank0.json.partial"));
}

TEST(Profiler, OffByDefaultAndAStartStepNeverReachedIsAWarning) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 64, 16, 3,
      {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.max_steps=2", "metrics.progress=plain"});
  const CommandResult off = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/profile"));
  const CommandResult late = run_command(ddptrain_path() + " " + cfg + " --profile.steps=3 --profile.start_step=9");
  ASSERT_EQ(late.exit_code, 0) << late.output;
  EXPECT_NE(late.output.find("warning: profile.start_step = 9 is not among the steps this run trained (it ended at "
                             "step 2): no trace written"),
            std::string::npos)
      << late.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/profile"));
}

// profile.memory_snapshot records the CUDA caching allocator: on the CPU it is said and the trace is written alone.
TEST(Profiler, MemorySnapshotOnTheCpuIsAWarningAndTheTraceIsStillWritten) {
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 64, 16, 3,
      {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.max_steps=3", "profile.start_step=2",
       "profile.steps=1", "profile.memory_snapshot=true", "metrics.progress=plain", "dist.device=cpu"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: profile.memory_snapshot records the CUDA caching allocator, and this run is on "
                          "cpu: the trace is written without a memory snapshot"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/profile/rank0.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/profile/memory_rank0.pickle"));
}

// On CUDA the snapshot is torch.cuda.memory._dump_snapshot's pickle: the allocator's segments and, for the traced
// steps, each allocation and free.
TEST(CudaProfiler, MemorySnapshotHoldsTheTracedStepsAllocations) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 256, 32, 3,
      {"job.out_dir=" + dir / "out", "data.batch_size=16", "training.max_steps=6", "profile.start_step=3",
       "profile.steps=2", "profile.memory_snapshot=true", "metrics.progress=plain", "dist.device=cuda"});
  const CommandResult r = run_command(ddptrain_path() + " " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string snapshot = dir / "out/profile/memory_rank0.pickle";
  EXPECT_NE(r.output.find("memory snapshot into " + snapshot), std::string::npos) << r.output;
  const std::string code =
      "import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); t = [e for d in s['device_traces'] for e in d]; "
      "print(len(s['segments']), sum(e['action'] == 'alloc' for e in t), sum(e['action'] == 'free_completed' for e in "
      "t))";
  const CommandResult read = run_command(python() + " -c " + shell_quote(code) + " " + shell_quote(snapshot));
  ASSERT_EQ(read.exit_code, 0) << read.output;
  std::istringstream counts(read.output);
  int64_t segments = 0, allocs = 0, frees = 0;
  counts >> segments >> allocs >> frees;
  EXPECT_GE(segments, 1) << read.output;
  EXPECT_GE(allocs, 20) << read.output;  // two steps of Net: activations, gradients, optimizer temporaries
  EXPECT_GE(frees, 10) << read.output;
  report_figure("memory snapshot of 2 Net steps on cuda (segments, allocations, frees)", read.output);
}

}  // namespace
}  // namespace ddp::test
