// scripts/gpu_check.py's report: the GPU tests' results and figures from CTest's JUnit file, the benchmark's goals
// and tables, and the machine, in GPU.md.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

TEST(GpuCheckReport, TestsFiguresAndBenchGoalsBecomeGpuMd) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torch, torchvision";
  TempDir dir;
  const std::string state = dir / "state";
  write_file(state + "/gpu-tests.xml", R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="3" failures="1" skipped="1">
  <testcase name="OnDevice/AcceptanceOnDevice.QuickstartReaches85PercentOnOneRank/Cuda" time="9.5" status="run">
    <system-out>[ RUN      ] ...
[figure] quickstart test accuracy on cuda, AMP float16: 0.8702
[figure] quickstart test accuracy on cuda, AMP bfloat16: 0.869
[       OK ] ...</system-out>
  </testcase>
  <testcase name="OnDevice/DdpOnDevice.TwoRanksTimesBatchEqualsOneRankTimesDoubleBatch/Cuda" time="3.25" status="fail">
    <failure message="Failed"/>
    <system-out>[figure] 2 ranks x 16 vs 1 rank x 32 on cuda, max abs diff after 16 steps: 0.000129</system-out>
  </testcase>
  <testcase name="CudaDeviceFeed.NormalisesUint8BatchesOnTheDevice" time="0.1" status="notrun">
    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>no CUDA GPU visible</system-out>
  </testcase>
</testsuite>
)xml");
  write_file(state + "/bench-goals.tsv", "ResNet-50 fp16 samples/s >= 1.0x Python\t1.15x (4787 vs 4145)\tmet\n");
  write_file(state + "/bench.md", "| bench table | 4787 |\n");
  write_file(state + "/version.txt", "ddptrain 9.9.9\n");
  const auto r = run_command(python() + " " + shell_quote(source_dir() + "/scripts/gpu_check.py") + " report " +
                             shell_quote(state) + " " + shell_quote(binary_dir()) + " " + shell_quote(dir / "GPU.md"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = read_file(dir / "GPU.md");
  for (const std::string& expected :
       {std::string("| `OnDevice/AcceptanceOnDevice.QuickstartReaches85PercentOnOneRank/Cuda` | quickstart test "
                    "accuracy on cuda, AMP float16: 0.8702; quickstart test accuracy on cuda, AMP bfloat16: 0.869 | "
                    "**met** |"),
        std::string("| `OnDevice/DdpOnDevice.TwoRanksTimesBatchEqualsOneRankTimesDoubleBatch/Cuda` | 2 ranks x 16 vs "
                    "1 rank x 32 on cuda, max abs diff after 16 steps: 0.000129 | **not met** |"),
        std::string("| `CudaDeviceFeed.NormalisesUint8BatchesOnTheDevice` | — | **n/a** |"),
        std::string("| ResNet-50 fp16 samples/s >= 1.0x Python | 1.15x (4787 vs 4145) | **met** |"),
        std::string("| CudaDeviceFeed.NormalisesUint8BatchesOnTheDevice | **skipped** | 0.1 s | — |"),
        std::string("| bench table | 4787 |"), std::string("ddptrain --version: ddptrain 9.9.9"),
        std::string("torch 2.11.0"), std::string("ldd: libtorch_cpu.so => ")}) {
    EXPECT_NE(md.find(expected), std::string::npos) << expected << "\n---\n" << md;
  }
}

}  // namespace
}  // namespace ddp::test
