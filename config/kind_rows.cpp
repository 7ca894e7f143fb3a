// KindRows: the rows handed down to config/, kept for the process.
#include "config/kind_rows.h"

#include <memory>
#include <stdexcept>
#include <utility>

namespace ddp {
namespace {

std::unique_ptr<const KindRows>& handed_rows() {
  static std::unique_ptr<const KindRows> rows;
  return rows;
}

}  // namespace

void hand_down_kind_rows(KindRows rows) { handed_rows() = std::make_unique<const KindRows>(std::move(rows)); }

const KindRows& kind_rows() {
  const std::unique_ptr<const KindRows>& rows = handed_rows();
  if (!rows)
    throw std::logic_error(
        "no model, optimizer or dataset rows were handed to config/: call hand_down_kind_rows (train/linked_kinds.h) "
        "before reading a config");
  return *rows;
}

const std::vector<ModelRow>& model_rows() { return kind_rows().models; }
const std::vector<OptimizerKeyRow>& optimizer_rows() { return kind_rows().optimizers; }
const std::vector<DatasetRow>& dataset_rows() { return kind_rows().datasets; }

}  // namespace ddp
