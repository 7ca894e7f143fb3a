// bench/gpu_bench.py (the GPU comparison) in its CPU smoke mode: both sides train, the figures and the report
// come out. Its GPU figures need a GPU (scripts/gpu-check); this checks the plumbing only.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

TEST(GpuBench, CpuSmokeRunTrainsBothSidesAndWritesTheReport) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const auto r =
      run_command("cd " + shell_quote(source_dir()) + " && " + python() +
                  " bench/gpu_bench.py --device cpu --smoke --timeout 120 --ddptrain " + shell_quote(ddptrain_path()) +
                  " --json " + shell_quote(dir / "bench.json") + " --markdown " + shell_quote(dir / "bench.md") +
                  " --goals " + shell_quote(dir / "goals.tsv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The figures: both sides trained (samples/s > 0), the ratio is theirs; no GPU, so no peak GPU memory.
  const auto check = run_command(
      python() + " -c " +
      shell_quote("import json, sys; f = json.load(open(sys.argv[1]))['figures'][0]; m, r = f['median'], f['ratio']; "
                  "d, p = m['ddptrain']['rate'], m['python']['rate']; "
                  "assert d > 0 and p > 0 and abs(r['rate'] - d / p) < 1e-9, f; "
                  "assert m['ddptrain']['gpu_mem_peak_mib'] is None and r['gpu_mem_peak_mib'] is None, f; "
                  "print('ok', d, p)") +
      " " + shell_quote(dir / "bench.json"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  // The report's summary row says the same, with n/a for GPU memory.
  const std::string md = read_file(dir / "bench.md");
  const std::regex row(R"(\| smoke resnet18 synthetic 3x32x32, fp16, channels_last, batch 8, world 1, cpu[^|]*)"
                       R"(\| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \| n/a \| n/a \| n/a \|)");
  EXPECT_TRUE(std::regex_search(md, row)) << md;
  // Both commands and ddptrain's config are in the report; the smoke run sets no goal.
  EXPECT_NE(md.find("torch_worker.py"), std::string::npos) << md;
  EXPECT_NE(md.find("--precision fp16 --device cpu"), std::string::npos) << md;
  EXPECT_NE(md.find("memory_format = \"channels_last\""), std::string::npos) << md;
  EXPECT_EQ(read_file(dir / "goals.tsv"), "");
}

}  // namespace
}  // namespace ddp::test
