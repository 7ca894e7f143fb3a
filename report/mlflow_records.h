// What a run tells MLflow: its params from the resolved config, and the metrics of each metrics.jsonl record.
#pragma once

#include "config/config.h"
#include "report/metrics_table.h"
#include "report/mlflow/mlflow_run.h"

#include <cstdint>
#include <vector>

namespace ddp {

// The run for metrics.mlflow_uri: experiment metrics.mlflow_experiment (or job.name), run name job.name, tag
// ddptrain.version, and every config key as a param "section.key" holding its resolved value as --print-config
// writes it (a string without its TOML quotes).
MlflowRunSpec mlflow_run_spec(const Config& cfg);

// A record's numeric fields as MLflow metrics at `step`: a train record's under their metrics.jsonl names, an eval
// record's prefixed "eval_" (eval_accuracy); the step itself and values that are not finite (null in metrics.jsonl)
// are left out.
std::vector<MlflowMetric> mlflow_metrics(const MetricValues& values, int64_t step, int64_t timestamp_ms);

}  // namespace ddp
