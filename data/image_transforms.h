// Image transforms with torchvision.transforms.v2's semantics on uint8 tensors: Resize, CenterCrop, RandomResizedCrop
// and RandomHorizontalFlip, their random parameters drawn from a generator of the caller's.
#pragma once

#include "config/choices.h"

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>
#include <utility>

namespace ddp {

// A crop window in pixels.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

// RandomResizedCrop's scale (fraction of the area) and ratio (width / height) ranges; torchvision's defaults.
struct CropRanges {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};

// v2.Resize(size) with one size: the shorter side becomes `size`, the longer one keeps the aspect ratio (truncated),
// bilinear (or bicubic) with antialias. `image`: uint8 [C, H, W] (any strides). Computed as torchvision computes it:
// bilinear in ATen's uint8 kernel where the CPU has AVX2 or AVX-512, in float32 then rounded back elsewhere; bicubic
// in ATen's uint8 kernel (resize_image's _do_native_uint8_resize_on_cpu). The result of ATen's vectorised uint8 kernel
// is laid out channels last (HWC strides), as that kernel writes it; its values are torchvision's whatever the layout.
torch::Tensor resize_shorter_side(const torch::Tensor& image, int64_t size,
                                  Interpolation mode = Interpolation::Bilinear);

// v2.Resize([height, width]): the same kernel to an exact size.
torch::Tensor resize_to(const torch::Tensor& image, int64_t height, int64_t width,
                        Interpolation mode = Interpolation::Bilinear);

// The size v2.Resize(size) gives an image of height x width: {height, width} with the shorter side `size`.
std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size);

// v2.CenterCrop(size) for an image at least `size` on both sides (torchvision rounds the offsets half to even).
torch::Tensor center_crop(const torch::Tensor& image, int64_t size);

// v2.RandomResizedCrop.make_params: the same draws from `gen` in the same order as torchvision draws them from the
// global generator (ten tries, then the central crop).
CropBox random_resized_crop_box(int64_t height, int64_t width, const CropRanges& ranges, at::Generator& gen);

// The JPEG DCT scale denominator (1, 2, 4 or 8) a training crop may be decoded at: the largest whose scaled box is
// still at least `size` on both sides.
unsigned training_crop_scale(const CropBox& box, int64_t size);

// `box` (in full-size pixels) in an image decoded at 1/scale, height x width: its edges divided by `scale`, rounded
// outwards, within the image.
CropBox scaled_box(const CropBox& box, unsigned scale, int64_t height, int64_t width);

// RandomHorizontalFlip(p = 0.5)'s draw: torch.rand(1) < 0.5, from `gen`.
bool random_flip(at::Generator& gen);

// A sample's transform as parameters, for the device that decodes its file whole (data.decode = "gpu"): training's
// RandomResizedCrop (the box drawn from the full size in the header, resized to size x size) and flip, or
// evaluation's Resize(resize) + CenterCrop(size).
struct DeviceTransform {
  bool train = true;
  CropBox crop;  // training
  bool flip = false;
  int64_t size = 0, resize = 0;
  Interpolation interpolation = Interpolation::Bilinear;
};

// The transform of a uint8 [C, H, W] image decoded whole, on the image's device, in float32 and not rounded: as
// torchvision transforms a uint8 tensor off the CPU (ATen's antialiased kernel in float32, bicubic's clamped to
// [0, 255], then round, which the caller does for a whole batch at once). Returns float32 [C, size, size], flipped when
// the transform says so.
torch::Tensor apply_device_transform(const torch::Tensor& image, const DeviceTransform& t);

// The per-sample generator seed of an augmented epoch: a 64-bit mix of (seed, epoch, sample index), so a sample's
// crop and flip do not depend on which thread or rank decodes it, nor on a resume.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

}  // namespace ddp
