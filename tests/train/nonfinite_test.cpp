// A run whose gradients stop being finite ends there: exit 1 and one error line naming the step, the parameter
// and the newest checkpoint, no model.pt, and no checkpoint holding a non-finite value.
#include "tests/report/metrics_fields.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ddp::test {
namespace {

// SGD at lr 50 with momentum and dropout on Fashion-MNIST: the loss is NaN within a few steps; the run must stop
// there, not go on to exit 0 with a NaN model.pt.
std::string diverging_run(const std::string& out) {
  return source_dir() +
         "/configs/quickstart.toml --optimizer.lr=50 --model.dropout=0.5 "
         "--lr_scheduler.warmup_steps=0 --lr_scheduler.decay=none --training.max_steps=40 "
         "--checkpoint.every_steps=2 --metrics.progress=off --job.out_dir=" +
         out;
}

void expect_stopped(const RankResult& r, const std::string& out) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the gradients are not finite (loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("first in backward order: fc2.bias)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped before the optimizer step; newest checkpoint: " + out + "/checkpoints/step-"),
            std::string::npos)
      << r.output;
}

TEST(NonFinite, DivergingRunStopsNamingStepParameterAndCheckpoint) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "no Fashion-MNIST";
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const auto one = run_command("OMP_NUM_THREADS=1 " + ddptrain_path() + " " + diverging_run(dir / "one"));
  expect_stopped({one.exit_code, one.output}, dir / "one");
  EXPECT_FALSE(std::filesystem::exists(dir / "one/model.pt"));
  // Both ranks see the same all-reduced gradients: both stop at the same step, no rank left waiting.
  const auto two = run_ranks(2, diverging_run(dir / "two"));
  for (const auto& r : two) expect_stopped(r, dir / "two");
  EXPECT_EQ(two[0].output.substr(two[0].output.find("step ")), two[1].output.substr(two[1].output.find("step ")));
  EXPECT_FALSE(std::filesystem::exists(dir / "two/model.pt"));
  // Every checkpoint either run wrote holds finite numbers only.
  const auto finite = run_command(python() +
                                  " -c \"import glob, sys, torch\n"
                                  "paths = sorted(glob.glob(sys.argv[1] + '/*/checkpoints/step-*.pt'))\n"
                                  "assert paths\n"
                                  "for p in paths:\n"
                                  "    d = torch.load(p, weights_only=False)\n"
                                  "    bad = [k for k, t in d['model'].items() if not torch.isfinite(t).all()]\n"
                                  "    print(p, 'finite' if not bad else bad)\n"
                                  "\" " +
                                  dir.path());
  ASSERT_EQ(finite.exit_code, 0) << finite.output;
  EXPECT_EQ(finite.output.find("["), std::string::npos) << finite.output;
}

// training.on_nonfinite = "skip": every rank skips the same non-finite steps (no optimizer step, a warning each,
// counted in metrics.jsonl) and, after training.max_nonfinite_skips of them in a row, stops at the next as above.
TEST(NonFinite, SkipModeSkipsOnEveryRankThenStopsAfterTheLimitInARow) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "no Fashion-MNIST";
  TempDir dir;
  const auto two = run_ranks(2, diverging_run(dir / "skip") +
                                    " --training.on_nonfinite=skip --training.max_nonfinite_skips=3 "
                                    "--metrics.log_every_steps=1 --metrics.progress=plain");
  for (const auto& r : two) {
    expect_stopped(r, dir / "skip");
    EXPECT_NE(r.output.find("; 3 steps before it were skipped in a row; stopped"), std::string::npos) << r.output;
  }
  EXPECT_NE(two[0].output.find("the gradients are not finite; step skipped on every rank (3 in a row, "
                               "training.max_nonfinite_skips = 3)"),
            std::string::npos)
      << two[0].output;
  int64_t skips = -1;
  for (const std::string& line : read_lines(dir / "skip/metrics.jsonl"))
    if (line.find("\"kind\":\"train\"") != std::string::npos) {
      const size_t at = line.find("\"nonfinite_skips\":");
      ASSERT_NE(at, std::string::npos) << line;
      skips = std::stoll(line.substr(at + 18));
    }
  EXPECT_EQ(skips, 3);
  RunConditions run;  // the records of skipped steps too (grad_norm null)
  run.multi_rank = run.nonfinite_skip = run.more_than_five_classes = true;
  EXPECT_GT(expect_records_as_the_table_says(dir / "skip/metrics.jsonl", run).first, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "skip/model.pt"));
}

// A checkpoint whose weights are not finite (written by another tool, or by an older ddptrain) is passed over
// by checkpoint.resume = "auto", which resumes from the newest good one before it, saying so.
TEST(NonFinite, AutoResumePassesOverACheckpointWithNonFiniteWeights) {
  if (!python_has_torch()) GTEST_SKIP() << "no torch in " << python();
  TempDir dir;
  const std::string cfg = write_tiny_job(
      dir, 64, 16, 3,
      {"data.batch_size=16", "checkpoint.every_steps=2", "metrics.progress=plain", "job.out_dir=" + dir / "out"});
  const CommandResult first = run_command(shell_quote(ddptrain_path()) + " " + cfg + " --training.max_steps=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // A NaN in step 4's weights, its manifest's size and CRC32 made to match (so only the values are wrong).
  const std::string ckpt = dir / "out/checkpoints/step-00000004.pt";
  const CommandResult poisoned = run_command(python() +
                                             " -c \"import json, sys, zlib, torch\n"
                                             "d = torch.load(sys.argv[1])\n"
                                             "d['model']['fc1.weight'][0, 0] = float('nan')\n"
                                             "torch.save(d, sys.argv[1])\n"
                                             "data = open(sys.argv[1], 'rb').read()\n"
                                             "m = sys.argv[1][:-3] + '.json'\n"
                                             "j = json.load(open(m))\n"
                                             "j['bytes'], j['crc32'] = len(data), zlib.crc32(data)\n"
                                             "json.dump(j, open(m, 'w'))\n"
                                             "\" " +
                                             ckpt);
  ASSERT_EQ(poisoned.exit_code, 0) << poisoned.output;
  const CommandResult resumed = run_command(shell_quote(ddptrain_path()) + " " + cfg + " --training.max_steps=6");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("skipping checkpoint " + ckpt +
                                ": checkpoint entry \"model\": fc1.weight holds values that are not finite"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + dir / "out/checkpoints/step-00000002.pt at step 2"),
            std::string::npos)
      << resumed.output;
}

}  // namespace
}  // namespace ddp::test
