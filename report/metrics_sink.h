// MetricsSink: where rank 0's figures go: a metrics.jsonl record each and, when asked, TensorBoard scalars.
#pragma once

#include "report/metrics.h"
#include "report/tensorboard.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

// A train record: figures reduced over every rank since the previous one.
struct TrainPoint {
  int64_t step = 0;
  int64_t epoch = 0;  // 1-based: the epoch the step belongs to
  double loss = 0;
  double accuracy = 0;
  double lr = 0;
  double samples_per_s = 0;
  int64_t samples = 0;
  double loss_scale = 1;
  int64_t skipped_steps = 0;
  double grad_norm = 0;
  std::optional<double> gpu_mem_peak_mib;  // max over ranks; none on CPU
  double wall_s = 0;
};

// An eval record over the whole test split.
struct EvalPoint {
  int64_t step = 0;
  int64_t epoch = 0;  // epochs done
  double loss = 0;
  double accuracy = 0;
  int64_t correct = 0;
  int64_t total = 0;
  int64_t correct_top5 = -1;  // < 0: the model has 5 classes or fewer
  double accuracy_top5 = -1;
  double wall_s = 0;
};

class MetricsSink {
 public:
  MetricsSink() = default;  // goes nowhere: what every rank but 0 has
  // out_dir/metrics.jsonl, appended to (a resumed run) or begun anew, and out_dir/tensorboard when `tensorboard`.
  MetricsSink(const std::string& out_dir, bool append, bool tensorboard);

  void train(const TrainPoint& p);
  void eval(const EvalPoint& p);
  // The points an interrupted run logged after the checkpoint it resumes from are orphans: TensorBoard drops those at
  // `step` or later.
  void purge_from(int64_t step);

 private:
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace ddp
