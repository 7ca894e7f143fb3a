// Test helper: the fields the metrics table says a run's records carry, checked against its metrics.jsonl.
#pragma once

#include "report/metrics_table.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ddp::test {

// What holds of a run, for each of the table's presence conditions.
struct RunConditions {
  bool multi_rank = false, cuda = false, known_gpu_peak = false, flops_counted = true, image_folder = false,
       nonfinite_skip = false, more_than_five_classes = false, ema = false, powersgd = false;

  bool holds(Presence when) const {
    switch (when) {
      case Presence::kAlways:
        return true;
      case Presence::kMultiRank:
        return multi_rank;
      case Presence::kCuda:
        return cuda;
      case Presence::kKnownGpuPeak:
        return known_gpu_peak;
      case Presence::kFlopsCounted:
        return flops_counted;
      case Presence::kEncodedImages:
        return image_folder;
      case Presence::kNonfiniteSkip:
        return nonfinite_skip;
      case Presence::kMoreThanFiveClasses:
        return more_than_five_classes;
      case Presence::kEma:
        return ema;
      case Presence::kPowerSgd:
        return powersgd;
    }
    return false;
  }
};

// The rows the table says a record of `kind` carries under `run`, in its order.
inline std::vector<const MetricRow*> rows_present(RecordKind kind, const RunConditions& run) {
  std::vector<const MetricRow*> rows;
  for (const MetricRow& row : metrics_table())
    if (row.kind == kind && run.holds(row.when)) rows.push_back(&row);
  return rows;
}

// Every record of a metrics.jsonl carries exactly the fields the table says, in its order. Returns the records
// read (train, eval).
inline std::pair<int, int> expect_records_as_the_table_says(const std::string& metrics_jsonl,
                                                            const RunConditions& run) {
  std::vector<std::string> expected[2];
  for (const RecordKind kind : {RecordKind::kTrain, RecordKind::kEval})
    for (const MetricRow* row : rows_present(kind, run)) expected[static_cast<int>(kind)].push_back(row->field);
  int counts[2] = {0, 0};
  for (const std::string& line : read_lines(metrics_jsonl)) {
    const nlohmann::ordered_json record = nlohmann::ordered_json::parse(line);
    const int kind = static_cast<int>(record.at("kind") == "train" ? RecordKind::kTrain : RecordKind::kEval);
    std::vector<std::string> keys;
    for (const auto& item : record.items()) keys.push_back(item.key());
    std::string want, got;
    for (const auto& k : expected[kind]) want += k + " ";
    for (const auto& k : keys) got += k + " ";
    EXPECT_EQ(got, want) << line;
    ++counts[kind];
  }
  return {counts[0], counts[1]};
}

// `field` of the last eval record in the metrics.jsonl at `path`: -1 when there is no eval record, `absent` when
// the last one lacks the field.
inline double last_eval_value(const std::string& path, const std::string& field, double absent = -2.0) {
  double value = -1;
  for (const std::string& line : read_lines(path)) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record["kind"] == "eval") value = record.value(field, absent);
  }
  return value;
}

}  // namespace ddp::test
