// Tests: top-5 accuracy is reported (metrics.jsonl, log line, summary) exactly when the model has more than 5 classes.
#include "tests/report/metrics_fields.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <regex>

namespace ddp::test {
namespace {

struct Top5Run {
  CommandResult run;
  std::string eval_record;
};

// Two steps on a synthetic set of `classes` classes, then the final eval.
Top5Run run_with_classes(const TempDir& dir, int classes) {
  const std::string out = dir / ("out" + std::to_string(classes));
  const std::string cfg = dir / "synthetic.toml";
  write_file(cfg,
             "[job]\nthreads = 1\n\n[data]\ndataset = \"synthetic\"\nimage_size = 28\nsynthetic_train_size = 64\n"
             "synthetic_test_size = 40\nbatch_size = 16\n\n[training]\nmax_steps = 2\n\n[metrics]\n"
             "progress = \"plain\"\n");
  Top5Run r;
  r.run = run_command(ddptrain_path() + " " + cfg + " --job.out_dir=" + out +
                      " --model.num_classes=" + std::to_string(classes));
  for (const auto& line : read_lines(out + "/metrics.jsonl"))
    if (line.find("\"kind\":\"eval\"") != std::string::npos) r.eval_record = line;
  return r;
}

int64_t integer_field(const std::string& record, const std::string& key) {
  std::smatch m;
  return std::regex_search(record, m, std::regex("\"" + key + "\":([0-9]+)")) ? std::stoll(m[1]) : -1;
}

TEST(EvalTop5, ReportedForSixClassesNotForFive) {
  TempDir dir;
  const Top5Run six = run_with_classes(dir, 6);
  ASSERT_EQ(six.run.exit_code, 0) << six.run.output;
  const int64_t correct = integer_field(six.eval_record, "correct"),
                correct_top5 = integer_field(six.eval_record, "correct_top5");
  ASSERT_GE(correct_top5, 0) << six.eval_record;
  EXPECT_GE(correct_top5, correct) << six.eval_record;
  EXPECT_NE(six.eval_record.find("\"accuracy_top5\":"), std::string::npos) << six.eval_record;
  EXPECT_NE(six.run.output.find(" top-5 "), std::string::npos) << six.run.output;  // the eval log line
  EXPECT_NE(six.run.output.find("(" + std::to_string(correct_top5) + "/40)"), std::string::npos) << six.run.output;
  EXPECT_NE(six.run.output.find("  final eval top-5"), std::string::npos) << six.run.output;
  // Every record carries the fields the metrics table says of one rank on CPU.
  RunConditions run;
  run.more_than_five_classes = true;
  EXPECT_EQ(expect_records_as_the_table_says(dir / "out6/metrics.jsonl", run), std::make_pair(1, 1));

  const Top5Run five = run_with_classes(dir, 5);
  ASSERT_EQ(five.run.exit_code, 0) << five.run.output;
  ASSERT_NE(five.eval_record.find("\"correct\":"), std::string::npos) << five.eval_record;
  EXPECT_EQ(five.eval_record.find("top5"), std::string::npos) << five.eval_record;
  EXPECT_EQ(five.run.output.find("top-5"), std::string::npos) << five.run.output;
  run.more_than_five_classes = false;
  EXPECT_EQ(expect_records_as_the_table_says(dir / "out5/metrics.jsonl", run), std::make_pair(1, 1));
}

}  // namespace
}  // namespace ddp::test
