// Tests: the run's last step is evaluated, also when training.max_steps ends it inside an epoch after an evaluated one,
// and a checkpoint due at that step carries the evaluation.
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

// The steps of metrics.jsonl's eval records, in order.
std::vector<int64_t> eval_steps(const std::string& metrics) {
  std::vector<int64_t> steps;
  static const std::regex kEvalStep("\"kind\":\"eval\",\"step\":([0-9]+)");
  for (const auto& line : read_lines(metrics)) {
    std::smatch m;
    if (std::regex_search(line, m, kEvalStep)) steps.push_back(std::stoll(m[1]));
  }
  return steps;
}

// 64 images in batches of 16: 4 steps an epoch, each epoch evaluated.
std::string write_config(const TempDir& dir) {
  const std::string cfg = dir / "synthetic.toml";
  write_file(
      cfg,
      "[job]\nthreads = 1\n\n[data]\ndataset = \"synthetic\"\nimage_size = 28\nsynthetic_train_size = 64\n"
      "synthetic_test_size = 32\nbatch_size = 16\n\n[training]\nepochs = 3\n\n[metrics]\nprogress = \"plain\"\n");
  return cfg;
}

TEST(FinalEval, MaxStepsInsideALaterEpochEvaluatesTheLastStep) {
  TempDir dir;
  const std::string cfg = write_config(dir);
  for (const auto& [max_steps, expected] :
       std::vector<std::pair<int, std::vector<int64_t>>>{{6, {4, 6}}, {8, {4, 8}}, {3, {3}}}) {
    const std::string out = dir / ("out" + std::to_string(max_steps));
    const CommandResult r = run_command(ddptrain_path() + " " + cfg + " --job.out_dir=" + out +
                                        " --training.max_steps=" + std::to_string(max_steps));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(eval_steps(out + "/metrics.jsonl"), expected) << "max_steps " << max_steps << "\n" << r.output;
  }
}

// checkpoint.every_steps due at the last step: the checkpoint is written after the final evaluation and records its
// accuracy (checkpoint.keep_best ranks by it); the one before records none (-1).
TEST(FinalEval, CheckpointDueAtTheLastStepCarriesTheFinalEvaluation) {
  TempDir dir;
  const std::string out = dir / "out";
  const CommandResult r = run_command(ddptrain_path() + " " + write_config(dir) + " --job.out_dir=" + out +
                                      " --training.max_steps=6 --checkpoint.every_steps=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string last_eval;
  for (const auto& line : read_lines(out + "/metrics.jsonl"))
    if (line.find("\"kind\":\"eval\",\"step\":6,") != std::string::npos) last_eval = line;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(last_eval, m, std::regex("\"accuracy\":([0-9.e-]+)"))) << last_eval;
  const std::string manifest = read_file(out + "/checkpoints/step-00000006.json");
  EXPECT_NE(manifest.find("\"eval_accuracy\":" + m[1].str() + "}"), std::string::npos) << manifest << "\n" << last_eval;
  EXPECT_NE(read_file(out + "/checkpoints/step-00000003.json").find("\"eval_accuracy\":-1}"), std::string::npos);
}

}  // namespace
}  // namespace ddp::test
