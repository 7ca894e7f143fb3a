// The dataset registry: every data.dataset's row, listed once (a dataset kind is its loader's file declaring
// NAME_dataset() plus its entry here), which config loading reads once they are handed down (train/linked_kinds.h);
// loading one.
#include "data/dataset_kind.h"

#include <stdexcept>

namespace ddp {

// The dataset kinds, in the order --help lists their names.
#define DDP_DATASETS(X) X(mnist) X(fashion_mnist) X(cifar10) X(image_folder) X(webdataset) X(synthetic)

#define DDP_DECLARE_DATASET(name) const DatasetKind& name##_dataset();
DDP_DATASETS(DDP_DECLARE_DATASET)
#undef DDP_DECLARE_DATASET

const std::vector<const DatasetKind*>& dataset_kinds() {
#define DDP_LIST_DATASET(name) &name##_dataset(),
  static const std::vector<const DatasetKind*> kinds{DDP_DATASETS(DDP_LIST_DATASET)};
#undef DDP_LIST_DATASET
  return kinds;
}

const DatasetKind& dataset_kind(std::string_view name) {
  return kind_named(dataset_kinds(), &DatasetKind::row, name, "data.dataset");
}

Dataset load_dataset(const DataConfig& data, const ModelConfig& model, int64_t seed, const DownloadNote& note) {
  Dataset ds = dataset_kind(data.dataset.name).load(data, model, seed, note);
  if (ds.channels != model.in_channels)
    throw std::runtime_error("dataset " + ds.name + " has " + std::to_string(ds.channels) +
                             " channel(s) but model.in_channels = " + std::to_string(model.in_channels));
  int64_t max_label = std::max(ds.train.labels.max().item<int64_t>(), ds.test.labels.max().item<int64_t>());
  if (max_label >= model.num_classes)
    throw std::runtime_error("dataset " + ds.name + " has label " + std::to_string(max_label) +
                             " but model.num_classes = " + std::to_string(model.num_classes));
  return ds;
}

}  // namespace ddp
