// BatchMix: torchvision.transforms.v2's MixUp and CutMix on a training batch, drawn from a generator keyed per batch.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>

namespace ddp {

// CutMix's box in pixels: rows [y1, y2), columns [x1, x2).
struct MixBox {
  int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// What one batch gets: nothing, MixUp with weight lam, or CutMix with its box and lam_adjusted.
struct MixDraw {
  enum class Kind { None, MixUp, CutMix } kind = Kind::None;
  double lam = 1.0;  // the weight of the batch's own samples and labels (CutMix: 1 - box area / image area)
  MixBox box;        // CutMix
};

// MixUp.transform on a batch [B, ...]: images.roll(1, 0).mul_(1 - lam).add_(images.mul(lam)).
torch::Tensor mixup_images(const torch::Tensor& images, double lam);
// CutMix.transform on a batch [B, C, H, W]: a copy whose [..., y1:y2, x1:x2] comes from images.roll(1, 0).
torch::Tensor cutmix_images(const torch::Tensor& images, const MixBox& box);
// _BaseMixUpCutMix._mixup_label: one_hot(labels, num_classes) as float32, then roll(1, 0).mul_(1 - lam) plus
// itself times lam. float32 [B, num_classes].
torch::Tensor mix_labels(const torch::Tensor& labels, int64_t num_classes, double lam);
// CutMix.make_params after its draws (lam ~ Beta, the box centre r_x < width, r_y < height): the box, clamped to
// the image, and lam_adjusted.
MixDraw cutmix_params(double lam, int64_t r_x, int64_t r_y, int64_t height, int64_t width);

// RandomChoice([MixUp(mixup_alpha), CutMix(cutmix_alpha)]) of torchvision's references/classification/train.py
// (get_mixup_cutmix: those whose alpha is above 0), drawn from `gen` in torchvision's order: the choice
// (torch.multinomial of equal probabilities, even with one transform), lam = Beta(alpha, alpha).sample()
// (torch._sample_dirichlet of [alpha, alpha], float32), then CutMix's randint(width) and randint(height).
// Kind::None when both alphas are 0 (nothing drawn).
MixDraw draw_mix(double mixup_alpha, double cutmix_alpha, int64_t height, int64_t width, at::Generator& gen);

// The generator seed of one micro-batch's draw: (job.seed, epoch, global step, rank, micro-batch in the step), so a
// run draws the same on every run and after a resume, whatever came before.
uint64_t mix_key(uint64_t seed, int64_t epoch, int64_t step, int64_t rank, int64_t micro_batch);

struct MixedBatch {
  torch::Tensor images;   // as given when not mixed
  torch::Tensor targets;  // float32 [B, num_classes], on the images' device; undefined when not mixed
};

// data.mixup_alpha and data.cutmix_alpha on the normalised float batches of a run, where they are (the training
// device); with both 0 a no-op that hands the batch back as it is.
class BatchMix {
 public:
  BatchMix(double mixup_alpha, double cutmix_alpha, int64_t num_classes);
  bool enabled() const { return mixup_alpha_ > 0 || cutmix_alpha_ > 0; }
  // images float [B, C, H, W], labels int64 [B] on the same device; the draw from a CPU generator seeded `key`.
  MixedBatch apply(const torch::Tensor& images, const torch::Tensor& labels, uint64_t key) const;
  // The images and soft targets of `draw` (as torchvision's transform with those parameters).
  MixedBatch apply(const torch::Tensor& images, const torch::Tensor& labels, const MixDraw& draw) const;

 private:
  double mixup_alpha_, cutmix_alpha_;
  int64_t num_classes_;
};

}  // namespace ddp
