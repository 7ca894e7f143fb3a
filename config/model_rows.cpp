// The model rows as config loading reads them: names and the docs made of them.
#include "config/model_rows.h"

#include "config/config.h"

#include <algorithm>

namespace ddp {

const ModelRow& model_row(std::string_view name) { return row_named(model_rows(), name, "model"); }

void resolve_model_defaults(ModelConfig& m) {
  const ModelRow& row = model_row(m.name.name);
  if (m.dropout == -1) m.dropout = std::max(row.dropout, 0.0);
  if (m.stochastic_depth == -1) m.stochastic_depth = std::max(row.stochastic_depth, 0.0);
}

std::vector<ImageSide> image_sides(const Config& cfg) {
  return {{"data.image_size", cfg.data.image_size},
          {"data.train_crop_size", cfg.data.train_crop_size},
          {"data.val_crop_size", cfg.data.val_crop_size}};
}

std::vector<std::string> model_names() { return names_in(model_rows()); }

const char* model_name_doc() {
  static const std::string doc = docs_by_name(model_rows());
  return doc.c_str();
}

const char* sync_batchnorm_doc() {
  static const std::string doc = [] {
    std::string listed;
    for (const std::string& name : names_in(model_rows(), [](const ModelRow& row) { return row.batch_norm; }))
      listed += (listed.empty() ? "" : ", ") + name;
    return "torch.nn.SyncBatchNorm: BatchNorm statistics over every rank's batch in training (" + listed + ")";
  }();
  return doc.c_str();
}

}  // namespace ddp
