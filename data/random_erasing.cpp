// v2.RandomErasing.make_params (torchvision/transforms/v2/_augment.py), draw for draw; its row.
#include "data/random_erasing.h"

#include "base/number_text.h"
#include "config/config.h"
#include "data/sample_transforms.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace ddp {

RandomErasing::RandomErasing(double p) : p_(p) {
  if (!(p >= 0 && p <= 1)) throw std::invalid_argument("RandomErasing: p in [0, 1]");
  // self._log_ratio = torch.log(torch.tensor(self.ratio)): float32.
  const torch::Tensor log_ratio = torch::log(torch::tensor({0.3, 3.3}, torch::kFloat64).to(torch::kFloat32));
  log_ratio_min_ = log_ratio[0].item<double>();
  log_ratio_max_ = log_ratio[1].item<double>();
}

std::optional<CropBox> RandomErasing::draw(int64_t height, int64_t width, at::Generator& gen) const {
  if (!active()) return std::nullopt;
  // _RandomApplyTransform.forward: `if torch.rand(1) >= self.p: return inputs`, compared in float32.
  if (torch::rand({1}, gen, torch::kFloat32).item<float>() >= static_cast<float>(p_)) return std::nullopt;
  constexpr double scale_min = 0.02, scale_max = 0.33;
  const auto area = static_cast<double>(height * width);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area =
        area * torch::empty({1}, torch::kFloat32).uniform_(scale_min, scale_max, gen).item<double>();
    const double aspect =
        torch::empty({1}, torch::kFloat32).uniform_(log_ratio_min_, log_ratio_max_, gen).exp().item<double>();
    // int(round(...)): halves to even. Unlike RandomResizedCrop, the height takes the product with the ratio.
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    const int64_t top = torch::randint(0, height - h + 1, {1}, gen, torch::kInt64).item<int64_t>();
    const int64_t left = torch::randint(0, width - w + 1, {1}, gen, torch::kInt64).item<int64_t>();
    return CropBox{top, left, h, w};
  }
  return std::nullopt;
}

namespace {

// data.random_erase > 0: the box drawn with the sample's other draws, zeroed after Normalize (data/batch_rows.h).
class ErasingTransform : public PixelTransform {
 public:
  explicit ErasingTransform(double p) : erasing_(p) {}
  std::string describe() const override {
    return "RandomErasing(p=" + number_text("%g", erasing_.p()) + ", after Normalize)";
  }
  void apply(TransformedSample& sample, at::Generator& gen) const override {
    sample.erase = erasing_.draw(sample.image.size(-2), sample.image.size(-1), gen);
  }
  bool runs_on_device() const override { return true; }
  void draw_for_device(DeviceDraw& draw, int64_t size, at::Generator& gen) const override {
    draw.erase = erasing_.draw(size, size, gen);
  }

 private:
  RandomErasing erasing_;
};

}  // namespace

const PixelTransformRow& random_erasing_transform() {
  static const PixelTransformRow row{"random_erasing",
                                     [](const DataConfig& data) -> std::unique_ptr<const PixelTransform> {
                                       if (data.random_erase <= 0) return nullptr;
                                       return std::make_unique<ErasingTransform>(data.random_erase);
                                     }};
  return row;
}

}  // namespace ddp
