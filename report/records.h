// StepRecord, EvalRecord, IntervalSplit: what the Reporter's train and eval records are made from.
#pragma once

#include "report/phase_times.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp {

// A step's figures recorded by name where they are computed (`record.figures.set("param_norm", x)`); the metrics
// table's recorded rows read them by their field name (NaN where a step did not record it: null in metrics.jsonl).
class RecordedFigures {
 public:
  void set(std::string_view name, double value) {
    for (auto& [n, v] : values_)
      if (n == name) {
        v = value;
        return;
      }
    values_.emplace_back(std::string(name), value);
  }
  double get(std::string_view name) const {
    for (const auto& [n, v] : values_)
      if (n == name) return v;
    return NAN;
  }

 private:
  std::vector<std::pair<std::string, double>> values_;
};

// One optimizer step: where it stands, what this rank computed in it, the optimizer and scaler after it.
struct StepRecord {
  int64_t step = 0, total_steps = 0;              // optimizer steps done (this one included), of the run
  int64_t epoch = 1, epochs = 1;                  // 1-based
  int64_t step_in_epoch = 0, steps_in_epoch = 0;  // steps_in_epoch: those this run will take of the epoch
  bool ends_epoch = false;
  double loss_sum = 0;  // over this rank's samples of the step
  int64_t correct = 0, samples = 0;
  double lr = 0, loss_scale = 1;
  int64_t skipped_steps = 0;  // steps the loss scaler skipped so far in this run
  // Unreadable training samples replaced so far in this run, this rank (-1: not read per sample), and steps skipped
  // for non-finite gradients so far in this run (-1: such a step stops the run).
  int64_t bad_samples = -1, nonfinite_skips = -1;
  // dist.grad_compression = "powersgd", rank 0's, at logged steps: gradient bytes handed to all-reduces in the step,
  // elements before over after compression so far (0 before compression starts), the error-feedback residuals'
  // L2 norm (0 without error feedback).
  std::optional<double> bytes_sent, compression_rate, residual_norm;
  PhaseTimes time;          // this rank's seconds in each phase of the step
  RecordedFigures figures;  // the figures its code recorded by name (grad_norm, param_norm, ...)
  // The log interval's figures over all ranks, filled in by the Reporter where it logs (NaN: not yet known).
  double loss = NAN, accuracy = NAN, samples_per_s = NAN;
};

// One evaluation over the whole test split, all ranks' counts summed.
struct EvalRecord {
  int64_t step = 0, epoch = 0;  // optimizer steps and epochs done
  double loss = 0;              // mean over the test split
  double accuracy = 0;          // correct / total
  int64_t correct = 0, total = 0;
  int64_t correct_top5 = -1;  // the label among the 5 largest outputs; -1 when the model has 5 classes or fewer
  double accuracy_top5 = -1;
  double loss_ema = NAN, accuracy_ema = NAN;  // of training.ema_decay's averaged weights; NaN when off
};

// What a log interval's train record says of every rank's time, from one reduction.
struct IntervalSplit {
  PhaseTimes mean;                   // seconds per step in each phase, mean over ranks
  std::optional<Straggler> slowest;  // none for a world of one
  double rss_peak_mib = 0;           // the largest peak RSS of any rank so far
  int64_t rss_peak_rank = 0;
};

}  // namespace ddp
