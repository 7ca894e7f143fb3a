// DatasetKind: one row per data.dataset, declared in the loader's own file and listed once in data/registry.cpp: its
// config row (defaults, which keys apply) and its loader.
#pragma once

#include "data/dataset.h"

#include <functional>
#include <string_view>
#include <vector>

namespace ddp {

struct DatasetKind {
  DatasetRow row;  // what config loading reads: name, default folder, images, statistics, which keys apply
  // The dataset data and model describe; throws std::runtime_error naming the missing or bad file.
  std::function<Dataset(const DataConfig& data, const ModelConfig& model, int64_t seed, const DownloadNote& note)> load;
};

// Every dataset kind, in the order --help lists data.dataset's names.
const std::vector<const DatasetKind*>& dataset_kinds();

// The kind named `name`; throws std::invalid_argument for a name without one.
const DatasetKind& dataset_kind(std::string_view name);

}  // namespace ddp
