// v2.ColorJitter (torchvision/transforms/v2/_color.py) on uint8 [C, H, W] images, draw for draw: the training split's
// data.jitter_brightness, data.jitter_contrast, data.jitter_saturation and data.jitter_hue; its row.
#include "base/number_text.h"
#include "config/config.h"
#include "data/auto_augment_ops.h"
#include "data/sample_transforms.h"

#include <torch/torch.h>

#include <array>
#include <optional>
#include <utility>

namespace ddp {
namespace {

using JitterRange = std::optional<std::pair<double, double>>;

// ColorJitter._check_input for a single number v: [center - v, center + v], the lower end clipped at 0 for the
// factors (not the hue), None when the range is the center alone (v = 0).
JitterRange jitter_range(double v, double center, bool clip_first_on_zero) {
  double low = center - v;
  const double high = center + v;
  if (clip_first_on_zero) low = std::max(low, 0.0);
  if (low == center && high == center) return std::nullopt;
  return std::pair{low, high};
}

class ColorJitterTransform : public PixelTransform {
 public:
  explicit ColorJitterTransform(const DataConfig& data)
      : ranges_{jitter_range(data.jitter_brightness, 1.0, true), jitter_range(data.jitter_contrast, 1.0, true),
                jitter_range(data.jitter_saturation, 1.0, true), jitter_range(data.jitter_hue, 0.0, false)} {}

  // ColorJitter's repr: the parameters that are not None, as (min, max).
  std::string describe() const override {
    static constexpr std::array<const char*, 4> names = {"brightness", "contrast", "saturation", "hue"};
    std::string text;
    for (size_t i = 0; i < ranges_.size(); ++i) {
      if (!ranges_[i]) continue;
      text += std::string(text.empty() ? "" : ", ") + names[i] + "=(" + number_text("%g", ranges_[i]->first) + ", " +
              number_text("%g", ranges_[i]->second) + ")";
    }
    return "ColorJitter(" + text + ")";
  }

  // make_params: torch.randperm(4), then torch.empty(1).uniform_(min, max).item() for each range that is not None,
  // brightness, contrast, saturation, hue; transform: the ops in the permutation's order, each that has a factor.
  void apply(TransformedSample& sample, at::Generator& gen) const override {
    const torch::Tensor order = torch::randperm(4, gen, torch::kInt64);
    std::array<double, 4> factors{};
    for (size_t i = 0; i < ranges_.size(); ++i)
      if (ranges_[i])
        factors[i] =
            torch::empty({1}, torch::kFloat32).uniform_(ranges_[i]->first, ranges_[i]->second, gen).item<double>();
    const auto* fn = order.data_ptr<int64_t>();
    for (int64_t k = 0; k < 4; ++k) {
      const auto id = static_cast<size_t>(fn[k]);
      if (!ranges_[id]) continue;
      switch (id) {
        case 0:
          sample.image = brightness_op(sample.image, factors[0]);
          break;
        case 1:
          sample.image = contrast_op(sample.image, factors[1]);
          break;
        case 2:
          sample.image = saturation_op(sample.image, factors[2]);
          break;
        default:
          sample.image = hue_op(sample.image, factors[3]);
          break;
      }
    }
  }

 private:
  std::array<JitterRange, 4> ranges_;  // brightness, contrast, saturation, hue
};

}  // namespace

const PixelTransformRow& color_jitter_transform() {
  static const PixelTransformRow row{"color_jitter",
                                     [](const DataConfig& data) -> std::unique_ptr<const PixelTransform> {
                                       if (data.jitter_brightness == 0 && data.jitter_contrast == 0 &&
                                           data.jitter_saturation == 0 && data.jitter_hue == 0)
                                         return nullptr;
                                       return std::make_unique<ColorJitterTransform>(data);
                                     }};
  return row;
}

}  // namespace ddp
