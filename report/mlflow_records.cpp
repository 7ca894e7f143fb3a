// MLflow's params of a run (its config keys) and metrics of a record (the metrics table's numeric fields).
#include "report/mlflow_records.h"

#include <cmath>
#include <cstdlib>

namespace ddp {
namespace {

// The string a TOML basic string holds, as config/key_walk.h's quoted() writes one ("\"", "\\", "\u00XX").
std::string toml_unquoted(const std::string& text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return text;
  std::string out;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] != '\\' || i + 2 >= text.size()) {
      out += text[i];
    } else if (text[i + 1] == 'u' && i + 6 < text.size()) {
      out += static_cast<char>(std::strtol(text.substr(i + 2, 4).c_str(), nullptr, 16));
      i += 5;
    } else {
      out += text[++i];
    }
  }
  return out;
}

}  // namespace

MlflowRunSpec mlflow_run_spec(const Config& cfg) {
  MlflowRunSpec spec;
  spec.uri = cfg.metrics.mlflow_uri;
  spec.experiment = cfg.metrics.mlflow_experiment.empty() ? cfg.job.name : cfg.metrics.mlflow_experiment;
  spec.run_name = cfg.job.name;
  spec.tags = {{"ddptrain.version", DDPTRAIN_VERSION}};
  for (const KeyInfo& key : describe_keys(cfg)) {  // "auto" of an int/auto key too
    const std::string name = key.section + "." + key.name, value = toml_unquoted(key.value);
    spec.params.emplace_back(name, value == spec.uri ? uri_without_userinfo(value) : value);  // no password shown
  }
  return spec;
}

std::vector<MlflowMetric> mlflow_metrics(const MetricValues& values, int64_t step, int64_t timestamp_ms) {
  std::vector<MlflowMetric> out;
  for (const auto& [row, value] : values) {
    if (row->type == MetricType::kString || std::string(row->field) == "step") continue;
    const double v = std::holds_alternative<int64_t>(value) ? static_cast<double>(std::get<int64_t>(value))
                                                            : std::get<double>(value);
    if (!std::isfinite(v)) continue;
    const std::string prefix = row->kind == RecordKind::kEval ? "eval_" : "";
    out.push_back({prefix + row->field, v, timestamp_ms, step});
  }
  return out;
}

}  // namespace ddp
