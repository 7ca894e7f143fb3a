// Dataset registry: builds the dataset data.dataset names (the names are config/choices.h's); shared normalisation.
#include "data/dataset.h"

#include <stdexcept>

namespace ddp {
namespace {

Dataset build_dataset(const DataConfig& data, const ModelConfig& model, int64_t seed, const DownloadNote& note) {
  switch (data.dataset) {
    case DatasetName::Mnist:
    case DatasetName::FashionMnist:
      return load_mnist_format(choice_name(data.dataset), data, note);
    case DatasetName::Synthetic:
      return make_synthetic(data, model, seed);
  }
  throw std::runtime_error("data.dataset holds no known dataset");
}

}  // namespace

Dataset load_dataset(const DataConfig& data, const ModelConfig& model, int64_t seed, const DownloadNote& note) {
  Dataset ds = build_dataset(data, model, seed, note);
  if (ds.channels != model.in_channels)
    throw std::runtime_error("dataset " + ds.name + " has " + std::to_string(ds.channels) +
                             " channel(s) but model.in_channels = " + std::to_string(model.in_channels));
  int64_t max_label = std::max(ds.train.labels.max().item<int64_t>(), ds.test.labels.max().item<int64_t>());
  if (max_label >= model.num_classes)
    throw std::runtime_error("dataset " + ds.name + " has label " + std::to_string(max_label) +
                             " but model.num_classes = " + std::to_string(model.num_classes));
  return ds;
}

const torch::Tensor& Split::ensure_images() {
  if (!images.defined() && read_images) images = read_images();
  if (!images.defined()) throw std::logic_error("dataset split has no images");
  return images;
}

void Split::release_images() {
  if (read_images) images = torch::Tensor();
}

torch::Tensor normalize_images(const torch::Tensor& uint8_images, double mean, double std) {
  return uint8_images.to(torch::kFloat32).div_(255).sub_(mean).div_(std);
}

}  // namespace ddp
