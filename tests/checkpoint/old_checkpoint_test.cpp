// A checkpoint written by ddptrain 0.3.0 (tests/fixtures/checkpoint-0.3.0) resumes bit-identically today.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// 0.3.0 wrote step-00000004.pt on 2 ranks (fp16 autocast, dynamic loss scaling, accumulation 2, dropout) while
// training cfg.toml for 10 steps. Resumed from it, today's ddptrain must end with the bytes of its own
// uninterrupted run: every entry (optimizer state, scaler, position, both ranks' generators) read as 0.3.0 wrote it,
// and the config recognised as the same although 0.3.0 hashed it another way.
TEST(OldCheckpoint, OneWrittenByDdptrain030ResumesBitIdentically) {
  TempDir dir;
  write_tiny_mnist(dir / "data", 320, 32, 12);
  const std::string fixture = source_dir() + "/tests/fixtures/checkpoint-0.3.0";
  std::filesystem::copy_file(fixture + "/cfg.toml", dir / "cfg.toml");
  for (const auto& r : run_ranks(2, "cfg.toml --job.out_dir=full", "", 1, dir.path()))
    ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto resumed = run_ranks(
      2, "cfg.toml --job.out_dir=resumed --metrics.progress=plain --checkpoint.resume=" + shell_quote(fixture + "/step-00000004.pt"), "", 1,
      dir.path());
  for (const auto& r : resumed) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(resumed[0].output.find("at step 4 (epoch 1, micro-batch 8)"), std::string::npos) << resumed[0].output;
  EXPECT_EQ(resumed[0].output.find("warning"), std::string::npos) << resumed[0].output;
  EXPECT_EQ(read_file(dir / "full/model.pt"), read_file(dir / "resumed/model.pt"))
      << "max diff " << max_state_diff(dir / "full/model.pt", dir / "resumed/model.pt");
}

}  // namespace
}  // namespace ddp::test
