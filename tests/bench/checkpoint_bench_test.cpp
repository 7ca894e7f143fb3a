// bench/checkpoint_bench.py, the checkpoint stall harness: a short run of both sides writes its block (one row per
// checkpoint.async setting with its step time, stall ratio, peak RSS, checkpoint size and the host's steal) into a
// results file, the checkpoints in the folder --checkpoint-dir names.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

namespace ddp::test {
namespace {

TEST(CheckpointBench, ShortRunWritesBothSidesRows) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const std::string results = dir / "RESULTS.md";
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() +
                             " bench/checkpoint_bench.py --model net --image-size 28 --batch 8 --world 2 --every 3 "
                             "--steps 10 --reps 1 --checkpoint-dir " +
                             shell_quote(dir / "elsewhere") + " --results " + shell_quote(results));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = read_file(results);
  for (const char* side : {"true", "false"}) {
    // | side | median step ms | ratio | stall ms | peak RSS | checkpoint size | steal |
    const std::regex row(
        "\\| " + std::string(side) +
        R"( \| ([0-9.]+) \| ([0-9.]+)x \| (-?[0-9.]+) \| ([0-9.]+) MiB \| ([0-9.]+) MiB \| ([0-9.]+) s \|)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, row)) << side << "\n" << text;
    EXPECT_GT(std::stod(m[1]), 0) << text;
    EXPECT_GT(std::stod(m[4]), 100) << text;  // a real process's peak (LibTorch alone maps more)
    EXPECT_GT(std::stod(m[5]), 0) << text;
  }
  EXPECT_NE(text.find("Peak RSS added by the background copy:"), std::string::npos) << text;
  // The checkpoints went to the folder given (the bench reads the last one's size there) and were removed after.
  EXPECT_TRUE(std::filesystem::is_directory(dir / "elsewhere")) << text;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "elsewhere")) << text;
}

}  // namespace
}  // namespace ddp::test
