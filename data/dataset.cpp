// Dataset registry: maps data.dataset names to their factories; shared normalisation.
#include "data/dataset.h"

#include <map>
#include <stdexcept>

namespace ddp {
namespace {

const std::map<std::string, DatasetFactory>& registry() {
  static const std::map<std::string, DatasetFactory> r = {
      {"mnist", [](const DataConfig& d, const ModelConfig&, int64_t) { return load_mnist_format("mnist", d); }},
      {"fashion-mnist",
       [](const DataConfig& d, const ModelConfig&, int64_t) { return load_mnist_format("fashion-mnist", d); }},
      {"synthetic", [](const DataConfig& d, const ModelConfig& m, int64_t s) { return make_synthetic(d, m, s); }},
  };
  return r;
}

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : registry()) names.push_back(name);
  return names;
}

Dataset load_dataset(const DataConfig& data, const ModelConfig& model, int64_t seed) {
  auto it = registry().find(data.dataset);
  if (it == registry().end()) throw std::runtime_error("unknown dataset \"" + data.dataset + "\"");
  Dataset ds = it->second(data, model, seed);
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
