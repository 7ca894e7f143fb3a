// The dataset rows as config loading reads them: names and the doc made of them.
#include "config/dataset_rows.h"

namespace ddp {

const DatasetRow& dataset_row(std::string_view name) { return row_named(dataset_rows(), name, "dataset"); }

std::vector<std::string> dataset_names() { return names_in(dataset_rows()); }

const char* dataset_name_doc() {
  static const std::string doc = docs_by_name(dataset_rows());
  return doc.c_str();
}

}  // namespace ddp
