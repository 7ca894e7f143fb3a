// bench/data_bench.py, the input-pipeline comparison: a tiny run gives ddptrain's and DataLoader's rows with their
// ratios, and says so when no DALI side can run.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

TEST(DataBench, TinyRunGivesEachSidesRowAndItsRatioToDataLoader) {
  if (!python_has_modules("torch, torchvision, PIL, numpy")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() + " bench/data_bench.py --root " +
                             dir / "folder" +
                             " --images 40 --classes 2 --width 120 --height 90 --size 32 --batch 8 --batches 2 "
                             "--workers 1 --reps 1 --transforms tensor --dali-python " +
                             dir / "no_dali" + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(no DALI side: " + dir / "no_dali" + " does not exist"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\| 1 \| ddptrain \| \d+ \| (\d+) \| ([0-9.]+)x \|  \| )")))
      << r.output;
  EXPECT_GT(std::stod(m[1]), 0);
  EXPECT_GT(std::stod(m[2]), 0);
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\| 1 \| DataLoader \(tensor\) \| \d+ \| \d+ \| 1\.00x \|)")))
      << r.output;
}

}  // namespace
}  // namespace ddp::test
