// bench/shard_bench.py, the tar-shard comparison: a tiny run gives the image folder's, the shards' (on disk and, with
// nginx, over HTTP) and webdataset's rows with their ratios, and the start-up table for a sparse set of shards.
#include "tests/support/nginx_server.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

TEST(ShardBench, TinyRunGivesEachSidesRowAndTheStartUp) {
  if (!python_has_modules("torch, torchvision, PIL, numpy, webdataset"))
    GTEST_SKIP() << python() << " does not have torchvision or webdataset";
  TempDir dir;
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() + " bench/shard_bench.py --root " +
                             dir / "folder" +
                             " --images 64 --classes 2 --width 120 --height 90 --size 32 --batch 8 --batches 2 "
                             "--workers 1 --reps 1 --shard-size 1 --start-samples 3000 --start-shards 3 "
                             "--start-root " +
                             dir / "start" + " --results " + dir / "results.md" + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> sides = {"ddptrain image folder", "ddptrain shards, disk", "webdataset \\+ DataLoader"};
  if (have_nginx() && built_with_libcurl()) sides.push_back("ddptrain shards, HTTP loopback");
  for (const std::string& side : sides) {
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(r.output, m, std::regex("\\| 1 \\| " + side + " \\| \\d+ \\| (\\d+) \\| ([0-9.]+)x \\|")))
        << side << "\n"
        << r.output;
    EXPECT_GT(std::stod(m[1]), 0) << side;
    EXPECT_GT(std::stod(m[2]), 0) << side;
  }
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\| shards: 3 indexes \(0 MB\) \| 3000 \| [0-9.]+ \| \d+ \|)")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\| image_folder walk \| 3000 \| [0-9.]+ \| \d+ \|)")))
      << r.output;
  // The block kept in the file asked for, under its measuring arguments.
  EXPECT_NE(read_file(dir / "results.md").find("<!-- BEGIN shard_bench --images 64 --classes 2"), std::string::npos);
}

}  // namespace
}  // namespace ddp::test
