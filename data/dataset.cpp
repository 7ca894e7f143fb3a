// Dataset splits read on demand, and the normalisation every dataset shares.
#include "data/dataset.h"

#include <stdexcept>

namespace ddp {

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
