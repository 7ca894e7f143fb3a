// v2.RandomErasing's random box (scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0), drawn from a generator of the
// caller's in torchvision's order; the box is zeroed where the image is normalised (data/batch_rows.h).
#pragma once

#include "data/image_transforms.h"

#include <ATen/core/Generator.h>

#include <optional>

namespace ddp {

// v2.RandomErasing(p) for images of one size: p = 0 draws nothing and erases nothing (the transform left out).
class RandomErasing {
 public:
  explicit RandomErasing(double p = 0.0);
  bool active() const { return p_ > 0; }
  double p() const { return p_; }
  // RandomErasing.forward's draws for an image of height x width from `gen`: torch.rand(1) >= p keeps the image
  // whole; otherwise make_params's ten tries of an area and a log-uniform aspect ratio, the box's top and left drawn
  // for the first that fits strictly inside; none fits: the image is kept whole (v is None).
  std::optional<CropBox> draw(int64_t height, int64_t width, at::Generator& gen) const;

 private:
  double p_;
  double log_ratio_min_, log_ratio_max_;  // torch.log(torch.tensor((0.3, 3.3))): float32 values
};

}  // namespace ddp
