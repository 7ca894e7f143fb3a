// KindRows: the rows of the kinds a config names (model.name, optimizer.name, data.dataset), handed down to config/
// by the program that links the registries listing them; config/ reads them and defines none.
#pragma once

#include "config/dataset_rows.h"
#include "config/model_rows.h"
#include "config/optimizer_rows.h"

#include <vector>

namespace ddp {

// Each kind declares its row beside its factory, update rule or loader (models/, optim/, data/, floors above
// config/), and its folder's registry lists the rows once; a program hands them down before it reads or builds a
// config (train/linked_kinds.h: ddptrain's main, the test runner, the benchmarks and fuzz targets that parse configs).
struct KindRows {
  std::vector<ModelRow> models;
  std::vector<OptimizerKeyRow> optimizers;
  std::vector<DatasetRow> datasets;
};

// Makes `rows` the rows every config reads from now on; called once, before any config is read or built.
void hand_down_kind_rows(KindRows rows);

// The rows handed down; throws std::logic_error when none were (a program that reads configs without them).
const KindRows& kind_rows();

}  // namespace ddp
