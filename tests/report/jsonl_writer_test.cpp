// Tests: drop_records_after, which a resume runs over metrics.jsonl.
#include "report/jsonl_writer.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// Records past the step go, the step's own and those without a step stay in order, and so does an unfinished last
// line (a kill in the middle of a write); a file with nothing to drop is left as it is, an absent one absent.
TEST(JsonlWriter, DropRecordsAfterKeepsTheResumedStepsRecordsAndDropsTheRest) {
  TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  write_file(path,
             "{\"kind\":\"train\",\"step\":9,\"loss\":1}\n{\"kind\":\"eval\",\"step\":10,\"global_step\":99}\n"
             "{\"kind\":\"note\"}\n{\"kind\":\"train\",\"step\":11,\"loss\":2}\n{\"kind\":\"eval\",\"step\":100}\n"
             "{\"kind\":\"train\",\"st");
  drop_records_after(path, 10);
  EXPECT_EQ(read_file(path),
            "{\"kind\":\"train\",\"step\":9,\"loss\":1}\n{\"kind\":\"eval\",\"step\":10,\"global_step\":99}\n"
            "{\"kind\":\"note\"}\n");
  drop_records_after(path, 10);
  EXPECT_EQ(read_file(path),
            "{\"kind\":\"train\",\"step\":9,\"loss\":1}\n{\"kind\":\"eval\",\"step\":10,\"global_step\":99}\n"
            "{\"kind\":\"note\"}\n");
  drop_records_after(dir / "absent.jsonl", 10);
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.jsonl"));
}

}  // namespace
}  // namespace ddp::test
