// Tests: the metrics table (report/metrics_table.h): unique fields and tags, readers that give each row's type exactly
// when its condition holds, and docs/metrics.md's block generated from it.
#include "report/metrics_table.h"
#include "tests/report/metrics_fields.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <set>

namespace ddp::test {
namespace {

TEST(MetricsTable, FieldsAreUniquePerRecordKindAndTagsUnique) {
  std::set<std::pair<RecordKind, std::string>> fields;
  std::set<std::string> tags;
  for (const MetricRow& row : metrics_table()) {
    EXPECT_TRUE(fields.insert({row.kind, row.field}).second) << "field " << row.field << " twice";
    EXPECT_EQ(row.train != nullptr || row.recorded, row.kind == RecordKind::kTrain) << row.field;
    EXPECT_FALSE(row.recorded && (row.train || row.type != MetricType::kNumber)) << row.field;
    EXPECT_EQ(row.eval != nullptr, row.kind == RecordKind::kEval) << row.field;
    EXPECT_NE(std::string(row.doc), "") << row.field;
    if (row.tag) {
      EXPECT_TRUE(tags.insert(row.tag).second) << "tag " << row.tag << " twice";
      EXPECT_EQ(row.no_tag, nullptr) << row.field;
      EXPECT_NE(row.type, MetricType::kString) << row.field << ": a TensorBoard scalar is a number";
    } else {
      ASSERT_NE(row.no_tag, nullptr) << row.field << ": no tag and no reason";
      // Every numeric field reaches TensorBoard, but the step every scalar is logged at.
      EXPECT_TRUE(row.type == MetricType::kString || std::string(row.field) == "step") << row.field;
    }
  }
  // The phase times follow PhaseTimes' phases.
  for (const char* phase : PhaseTimes::kNames)
    EXPECT_TRUE(fields.count({RecordKind::kTrain, "time_" + std::string(phase) + "_s"})) << phase;
}

// Tags documented before the table existed keep their names.
TEST(MetricsTable, DocumentedTagsStay) {
  std::set<std::string> tags;
  for (const MetricRow& row : metrics_table())
    if (row.tag) tags.insert(row.tag);
  for (const char* tag : {"train/loss", "train/accuracy", "eval/loss", "eval/accuracy", "eval/accuracy_top5",
                          "eval/loss_ema", "eval/accuracy_ema", "lr", "amp/loss_scale", "amp/skipped_steps",
                          "perf/samples_per_s", "perf/tflops", "perf/mfu", "perf/rss_peak_mib", "time/data_s",
                          "time/compute_s", "time/comm_s", "time/optimizer_s", "perf/gpu_mem_peak_mib"})
    EXPECT_TRUE(tags.count(tag)) << tag;
}

constexpr Presence kConditions[] = {Presence::kAlways,        Presence::kMultiRank,           Presence::kCuda,
                                    Presence::kKnownGpuPeak,  Presence::kFlopsCounted,        Presence::kEncodedImages,
                                    Presence::kNonfiniteSkip, Presence::kMoreThanFiveClasses, Presence::kEma};

// A run where only `when` (besides kAlways) holds.
RunConditions only(Presence when) {
  RunConditions run;
  run.flops_counted = false;
  bool* flags[] = {nullptr,
                   &run.multi_rank,
                   &run.cuda,
                   &run.known_gpu_peak,
                   &run.flops_counted,
                   &run.image_folder,
                   &run.nonfinite_skip,
                   &run.more_than_five_classes,
                   &run.ema};
  if (bool* flag = flags[static_cast<int>(when)]) *flag = true;
  return run;
}

// The fields of a train and an eval record of a run under `run`, with every value the Reporter could hand over.
std::vector<std::pair<const MetricRow*, MetricValue>> record_values(RecordKind kind, const RunConditions& run) {
  StepRecord s;
  s.step = 7;
  s.loss = s.accuracy = s.samples_per_s = 0.5;
  for (const MetricRow& row : metrics_table())
    if (row.recorded) s.figures.set(row.field, 0.5);
  s.bad_samples = run.image_folder ? 2 : -1;
  s.nonfinite_skips = run.nonfinite_skip ? 1 : -1;
  IntervalSplit split;
  if (run.multi_rank) {
    split.slowest = Straggler{1, "compute", 0.25, 1.5};
    s.bytes_sent = 87360;
  }
  EvalRecord e;
  e.correct_top5 = run.more_than_five_classes ? 9 : -1;
  e.accuracy_top5 = run.more_than_five_classes ? 0.9 : -1;
  e.loss_ema = e.accuracy_ema = run.ema ? 0.75 : NAN;
  auto set = [](bool on, double v) { return on ? std::optional<double>(v) : std::nullopt; };
  if (kind == RecordKind::kTrain)
    return train_values({s, split, set(run.cuda, 100), set(run.flops_counted, 2), set(run.known_gpu_peak, 0.3), 9});
  return eval_values({e, 9});
}

TEST(MetricsTable, EachRowIsReadWithItsTypeExactlyWhenItsConditionHolds) {
  for (const Presence when : kConditions) {
    const RunConditions run = only(when);
    for (const RecordKind kind : {RecordKind::kTrain, RecordKind::kEval}) {
      std::string want, got;
      for (const MetricRow* row : rows_present(kind, run)) want += std::string(row->field) + " ";
      for (const auto& [row, value] : record_values(kind, run)) {
        got += std::string(row->field) + " ";
        EXPECT_EQ(value.index(), static_cast<size_t>(row->type)) << row->field;
      }
      EXPECT_EQ(got, want) << "only " << presence_text(when);
    }
  }
}

TEST(MetricsReference, DocsMetricsTableIsCurrent) {
  const std::string doc = read_file(source_dir() + "/docs/metrics.md");
  const std::string begin = "<!-- metrics: begin -->\n", end = "<!-- metrics: end -->\n";
  const size_t from = doc.find(begin), to = doc.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/metrics.md has no " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/metrics.md has no " << end;
  const std::string table = doc.substr(from + begin.size(), to - from - begin.size());
  EXPECT_EQ(table, metrics_markdown()) << "docs/metrics.md's table is stale: run scripts/update-docs";
  // The binary prints the same table.
  const CommandResult printed = run_command(ddptrain_path() + " --help-metrics-markdown");
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_EQ(printed.output, metrics_markdown());
  // One row per field, each naming its field and tag.
  for (const MetricRow& row : metrics_table())
    EXPECT_NE(table.find("| `" + std::string(row.field) + "` | "), std::string::npos) << row.field;
}

}  // namespace
}  // namespace ddp::test
