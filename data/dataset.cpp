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
    case DatasetName::Cifar10:
      return load_cifar10(data);
    case DatasetName::ImageFolder:
      return load_image_folder(data);
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
  static const torch::Tensor per_sample;
  if (source) return per_sample;
  if (!images.defined() && read_images) images = read_images();
  if (!images.defined()) throw std::logic_error("dataset split has no images");
  return images;
}

void Split::release_images() {
  if (read_images) images = torch::Tensor();
}

Normalizer::Normalizer(const PerChannel& mean, const PerChannel& std, c10::Device device) {
  // torchvision's Normalize: float32 tensors of the channel values, broadcast over [N, C, H, W].
  auto per_channel = [&](const PerChannel& v) {
    const auto c = static_cast<int64_t>(v.size());
    return torch::tensor(v, torch::kFloat64).to(torch::kFloat32).view({1, c, 1, 1}).to(device);
  };
  mean_ = per_channel(mean);
  std_ = per_channel(std);
}

torch::Tensor Normalizer::operator()(const torch::Tensor& uint8_images,
                                     std::optional<torch::MemoryFormat> memory_format) const {
  torch::Tensor x = uint8_images.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/false, memory_format).div_(255);
  return x.sub_(mean_).div_(std_);
}

torch::Tensor normalize_images(const torch::Tensor& uint8_images, const PerChannel& mean, const PerChannel& std,
                               std::optional<torch::MemoryFormat> memory_format) {
  return Normalizer(mean, std, uint8_images.device())(uint8_images, memory_format);
}

}  // namespace ddp
