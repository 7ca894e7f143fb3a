// hand_down_linked_kinds: the rows of every model, optimizer and dataset kind this program links, handed to config/.
#pragma once

#include "config/kind_rows.h"
#include "data/dataset_kind.h"
#include "models/model_kind.h"
#include "optim/optimizer_kind.h"

namespace ddp {

// The registries' rows (models/, optim/ and data/ list them, each in its --help order) as config/ reads them.
// Inline, so that a program linking those three folders without train/ hands them down alike.
inline KindRows linked_kind_rows() {
  return {rows_of(model_kinds(), &ModelKind::row), rows_of(optimizer_kinds(), &OptimizerKind::keys),
          rows_of(dataset_kinds(), &DatasetKind::row)};
}

// Called first by every program that reads configs: ddptrain_main, the test runner, the benchmarks' and fuzz
// targets' mains.
inline void hand_down_linked_kinds() { hand_down_kind_rows(linked_kind_rows()); }

}  // namespace ddp
