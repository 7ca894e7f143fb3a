// The metrics table: every metrics.jsonl field of train and eval records, its TensorBoard tag and when it is present.
#pragma once

#include "report/records.h"

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ddp {

enum class RecordKind { kTrain, kEval };

// When a field is in its records (and its tag, if it has one, in the event file).
enum class Presence {
  kAlways,
  kMultiRank,            // more than one rank
  kCuda,                 // a CUDA run
  kKnownGpuPeak,         // a GPU whose peak FLOP/s device_peak.h knows
  kFlopsCounted,         // the model's FLOPs per training sample counted (not 0)
  kEncodedImages,        // data.dataset = "image_folder" or "webdataset" (training samples read one by one)
  kNonfiniteSkip,        // training.on_nonfinite = "skip"
  kMoreThanFiveClasses,  // the model has more than 5 classes
  kEma,                  // training.ema_decay > 0
  kPowerSgd,             // dist.grad_compression = "powersgd"
};

enum class MetricType { kInteger, kNumber, kString };

using MetricValue = std::variant<int64_t, double, std::string>;

// What a train record is read from: the log interval's StepRecord as the Reporter logs it (loss, accuracy,
// samples_per_s, samples and bad_samples over all ranks), the interval's time split, and the Reporter's own figures.
struct TrainView {
  const StepRecord& step;
  const IntervalSplit& split;
  std::optional<double> gpu_mem_peak_mib, tflops, mfu;
  double wall_s = 0;
};

// What an eval record is read from.
struct EvalView {
  const EvalRecord& eval;
  double wall_s = 0;
};

// One metrics.jsonl field of one record kind. A row reads its value from a view of its kind (the other reader is
// null), or, when `recorded`, the step's figure of its name; and reads none where its `when` does not hold.
struct MetricRow {
  RecordKind kind;
  const char* field;  // the metrics.jsonl key
  MetricType type;
  const char* tag;     // the TensorBoard tag (SummaryWriter.add_scalar's tag); nullptr: none
  const char* no_tag;  // why there is none; nullptr where there is a tag
  Presence when;
  const char* doc;
  std::optional<MetricValue> (*train)(const TrainView&);
  std::optional<MetricValue> (*eval)(const EvalView&);
  bool recorded = false;  // a number the step recorded under this field's name (StepRecord::figures); train null
};

// Every row: train records' fields, then eval records', each in the order its records carry them.
const std::vector<MetricRow>& metrics_table();

// A record's fields: the rows of its kind that the view holds, with their values, in the table's order.
using MetricValues = std::vector<std::pair<const MetricRow*, MetricValue>>;
MetricValues train_values(const TrainView& view);
MetricValues eval_values(const EvalView& view);

std::string presence_text(Presence when);  // "always", "more than one rank", ...
// The table as Markdown: docs/metrics.md's block (ddptrain --help-metrics-markdown).
std::string metrics_markdown();

}  // namespace ddp
