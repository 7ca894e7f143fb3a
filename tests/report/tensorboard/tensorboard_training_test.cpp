// TensorBoard from a real run: every metrics.jsonl scalar recovered by TensorBoard's own reader.
//
// PyPI tensorboard's EventAccumulator (tests/python/tb_scalars.py) loads the log directory as `tensorboard --logdir`
// does and finds every numeric field of every record under the metrics table's tag, at float32 precision, and
// nothing more. The run has two ranks and training.on_nonfinite = "skip", so that every train field a CPU run has
// outside image folders is in it (ImageFolder.BadSamplesStopTheRunOrAreReplacedAndCounted checks data/bad_samples).
#include "tests/report/metrics_fields.h"
#include "tests/report/tensorboard/tensorboard_scalars.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>

namespace ddp::test {
namespace {

TEST(TensorBoardTraining, EventFileHoldsTheSameScalarsAsMetricsJsonl) {
  if (!python_has_modules("tensorboard")) GTEST_SKIP() << python() << " does not have tensorboard";
  TempDir dir;
  const std::string cfg =
      write_tiny_job(dir, 128, 32, 19,
                     {"job.out_dir=" + dir / "out", "data.batch_size=8", "training.epochs=2",
                      "metrics.log_every_steps=3", "metrics.tensorboard=true", "training.on_nonfinite=skip"});
  for (const auto& r : run_ranks(2, cfg)) ASSERT_EQ(r.exit_code, 0) << r.output;
  // tag -> step -> value from the event file.
  std::map<std::string, std::map<int64_t, double>> tb;
  for (const auto& s : read_tensorboard_scalars(dir / "out/tensorboard")) tb[s.tag][s.step] = s.value;
  ASSERT_FALSE(tb.empty());
  std::set<std::string> seen;
  for (const auto& entry : tb) seen.insert(entry.first);
  RunConditions run;
  run.multi_rank = run.nonfinite_skip = run.more_than_five_classes = true;
  const auto [train_records, eval_records] = expect_records_as_the_table_says(dir / "out/metrics.jsonl", run);
  std::set<std::string> tags;
  for (const std::string& line : read_lines(dir / "out/metrics.jsonl")) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const int64_t step = record.at("step").get<int64_t>();
    const RecordKind kind = record.at("kind") == "train" ? RecordKind::kTrain : RecordKind::kEval;
    for (const MetricRow* row : rows_present(kind, run)) {
      if (!row->tag) continue;
      tags.insert(row->tag);
      ASSERT_TRUE(tb[row->tag].count(step)) << row->tag << " step " << step;
      const nlohmann::json& field = record.at(row->field);
      const double want = field.is_null() ? NAN : field.get<double>();  // JSON null: not finite
      const auto got = static_cast<float>(tb[row->tag][step]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << row->tag << " step " << step;
      else
        EXPECT_EQ(got, static_cast<float>(want)) << row->tag << " step " << step;
    }
  }
  EXPECT_GE(train_records, 4);
  EXPECT_EQ(eval_records, 2);
  EXPECT_EQ(tb["train/loss"].size(), static_cast<size_t>(train_records));
  EXPECT_EQ(tb["eval/accuracy"].size(), static_cast<size_t>(eval_records));
  EXPECT_EQ(tb["eval/accuracy_top5"].size(), static_cast<size_t>(eval_records));  // 10 classes: top-5 reported
  // The gradient norm, the non-finite skips and the straggler reach TensorBoard with every train record.
  for (const char* tag : {"train/grad_norm", "train/nonfinite_skips", "time/slowest_rank", "time/slowest_excess_s"})
    EXPECT_EQ(tb[tag].size(), static_cast<size_t>(train_records)) << tag;
  // The table's tags, nothing else (a CPU run has no perf/gpu_mem_peak_mib or perf/mfu).
  EXPECT_EQ(seen, tags);
}

}  // namespace
}  // namespace ddp::test
