// What config loading reads of each dataset kind: its data.dataset, its images and their statistics, and which keys
// apply to it. Each kind declares its row beside its loader in data/; data/registry.cpp lists the rows once, and the
// program hands them down (config/kind_rows.h), so config/ learns of a new dataset kind without naming it.
#pragma once

#include "config/row_choice.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// A number for every image channel alike, or one per channel: TOML `0.5` or `[0.4914, 0.4822, 0.4465]`.
using PerChannel = std::vector<double>;

struct DatasetRow {
  std::string_view name;        // data.dataset
  std::string_view doc;         // what data.dataset's doc says of it; rows with one doc share it
  std::string_view dir;         // data.dir's default; "" for a kind that reads no files
  PerChannel mean, std;         // data.mean's and data.std's defaults (torchvision's usual Normalize values)
  int64_t channels = 0;         // model.in_channels' default; 0: model.in_channels decides the images' channels
  int64_t image_size = 0;       // data.image_size's default; 0: data.image_size's own
  bool any_image_size = false;  // data.image_size may be any (else only image_size)
  int64_t num_classes = 0;      // model.num_classes' default; 0: the class folders' count, or model.num_classes'
  bool download = false;        // data.download fetches its files
  // data.dir holds train/ and val/ with a folder of JPEG/PNG images per class (torchvision's ImageFolder): the
  // classes are train/'s folders.
  bool class_folders = false;
  // Its samples are encoded images (JPEG, PNG) decoded and transformed per sample: the crop and resize keys, the
  // training transform's keys and data.decode apply.
  bool image_files = false;
  // Its splits are tar shards in WebDataset's layout: data.train_shards and data.val_shards name them, and the
  // shard keys apply (data.shuffle_buffer, data.shards_in_flight, data.shard_retries,
  // data.class_names).
  bool shards = false;
};

// Every dataset kind's row, in the order --help lists the names (the rows handed down: config/kind_rows.h).
const std::vector<DatasetRow>& dataset_rows();

// The row of data.dataset `name`; throws std::logic_error for a name without one (the config refused it before).
const DatasetRow& dataset_row(std::string_view name);

// data.dataset's names in row order.
std::vector<std::string> dataset_names();
template <>
inline std::vector<std::string> row_names<DatasetRow>() {
  return dataset_names();
}

// data.dataset's doc: each row's doc after the names that give it.
const char* dataset_name_doc();

// data.dataset: a name of dataset_rows().
using DatasetChoice = RowChoice<DatasetRow>;

}  // namespace ddp
