// torchvision's automatic augmentation policies (v2.TrivialAugmentWide, v2.RandAugment, v2.AutoAugment's ImageNet
// policy, v2.AugMix) on uint8 [C, H, W] images: their random parameters drawn from a generator of the caller's in
// torchvision's order, then applied.
#pragma once

#include "config/choices.h"
#include "data/auto_augment_ops.h"

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <vector>

namespace ddp {

// One op of a policy as drawn: which op, its magnitude bin and sign, and the magnitude they give.
struct OpDraw {
  AugOp op = AugOp::Identity;
  int64_t bin = -1;      // index into the op's magnitudes; -1 for an op without magnitudes
  bool negated = false;  // the random sign of a signed op's magnitude
  double magnitude = 0;  // float(magnitudes[bin]), negated; 0 without magnitudes
};

// A policy's draws for one image: the ops of each chain in order (one chain but for AugMix's mixture), and AugMix's
// weights.
struct PolicyDraw {
  std::vector<std::vector<OpDraw>> chains;
  int64_t sub_policy = -1;      // imagenet: the sub-policy drawn (of 25)
  torch::Tensor mix;            // augmix: float32 [1, 2], Beta weights of the original and the mixture
  torch::Tensor chain_weights;  // augmix: float32 [1, chains], each chain's weight times mix[0, 1]
};

struct AutoAugmentOptions {
  AutoAugmentChoice policy = AutoAugmentChoice::None;
  int64_t ra_magnitude = 9;     // RandAugment(magnitude)
  int64_t ra_num_ops = 2;       // RandAugment(num_ops)
  int64_t augmix_severity = 3;  // AugMix(severity)
  PolicyInterpolation interpolation = PolicyInterpolation::Auto;  // the class's (interpolation=...)
};

// One policy with torchvision's defaults but for the options: num_magnitude_bins 31 (TrivialAugmentWide,
// RandAugment), AugMix's mixture_width 3, chain_depth -1 (1 to 3), alpha 1, all_ops; fill None (0); the options'
// interpolation, by default NEAREST for all but AugMix, which interpolates BILINEAR. "none" draws nothing and returns
// the image.
class AutoAugmentPolicy {
 public:
  explicit AutoAugmentPolicy(AutoAugmentOptions options);

  // The forward's random draws for an image of height x width, from `gen` in the order torchvision's forward makes
  // them from the global generator (torch.randint, torch.rand, torch._sample_dirichlet).
  PolicyDraw draw(int64_t height, int64_t width, at::Generator& gen) const;
  // The forward's ops with those draws.
  torch::Tensor apply(const torch::Tensor& image, const PolicyDraw& draw) const;
  // apply(image, draw(height, width, gen)).
  torch::Tensor operator()(const torch::Tensor& image, at::Generator& gen) const;

  bool active() const { return options_.policy != AutoAugmentChoice::None; }
  // The ops a draw picks from uniformly (_AUGMENTATION_SPACE's keys in order); imagenet: every op its sub-policies
  // name.
  const std::vector<AugOp>& ops() const;
  // The number of magnitude bins of the ops (31, or 10 for imagenet and augmix).
  int64_t magnitude_bins() const;
  // Whether `op` has magnitudes in this policy, and whether their sign is drawn.
  bool has_magnitudes(AugOp op) const;
  bool signed_op(AugOp op) const;
  // The op's magnitudes for an image of height x width (the _AUGMENTATION_SPACE lambda at magnitude_bins()), as
  // doubles of the float32 or int32 values torchvision computes.
  std::vector<double> magnitudes(AugOp op, int64_t height, int64_t width) const;

 private:
  OpDraw draw_op(AugOp op, int64_t bin_or_minus_one, int64_t bins_to_draw, int64_t height, int64_t width,
                 at::Generator& gen) const;
  AutoAugmentOptions options_;
};

}  // namespace ddp
