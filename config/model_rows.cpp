// The model rows as config loading reads them: names and the docs made of them.
#include "config/model_rows.h"

namespace ddp {

const ModelRow& model_row(std::string_view name) { return row_named(model_rows(), name, "model"); }

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
