// The per-sample transforms of a class-folder split as one list built from the config, in the order of torchvision's
// reference presets (references/classification/presets.py): the crop stage, then each pixel op, every random
// parameter drawn from the sample's generator in the list's order; the rows of the pixel ops.
#pragma once

#include "config/choices.h"
#include "data/image_decode.h"
#include "data/image_transforms.h"

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

struct DataConfig;

// A sample on its way through the list: uint8 [C, H, W] pixels, and the box v2.RandomErasing zeroes once the batch is
// normalised (none: kept whole).
struct TransformedSample {
  torch::Tensor image;
  std::optional<CropBox> erase;
};

// What a device that decodes the file whole applies (data.decode = "gpu"): the crop stage and the flip as parameters,
// and the erased box.
struct DeviceDraw {
  DeviceTransform transform;
  std::optional<CropBox> erase;
};

// One op after the crop stage: it draws its random parameters from the sample's generator, then applies them.
class PixelTransform {
 public:
  virtual ~PixelTransform() = default;
  // The op with its parameters, as torchvision's repr names them: "RandomHorizontalFlip(p=0.5)".
  virtual std::string describe() const = 0;
  virtual void apply(TransformedSample& sample, at::Generator& gen) const = 0;
  // Whether a device decode applies it (DeviceTransform's flip, the erased box); draw_for_device then makes apply()'s
  // draws for a size x size crop and records them in `draw`.
  virtual bool runs_on_device() const { return false; }
  virtual void draw_for_device(DeviceDraw& /*draw*/, int64_t /*size*/, at::Generator& /*gen*/) const {}
};

// A kind of pixel op: its name and how a training split's config makes it (nullptr: the config leaves it out).
struct PixelTransformRow {
  const char* name;
  std::unique_ptr<const PixelTransform> (*make)(const DataConfig& data);
};

// The training split's pixel ops in the order they run (v2.Compose([RandomResizedCrop, RandomHorizontalFlip, policy,
// ColorJitter, PILToTensor, ToDtype, Normalize, RandomErasing])): a new op is one file defining NAME_transform() beside
// the op and one X(NAME) here.
#define DDP_PIXEL_TRANSFORMS(X) X(horizontal_flip) X(auto_augment) X(color_jitter) X(random_erasing)
#define DDP_DECLARE_PIXEL_TRANSFORM(NAME) const PixelTransformRow& NAME##_transform();
DDP_PIXEL_TRANSFORMS(DDP_DECLARE_PIXEL_TRANSFORM)
#undef DDP_DECLARE_PIXEL_TRANSFORM

// The rows in DDP_PIXEL_TRANSFORMS's order.
const std::vector<const PixelTransformRow*>& pixel_transform_rows();

// A split's transform: training (`train`): RandomResizedCrop(data.train_crop_size) drawn from the file's full size,
// then the rows' ops the config turns on; evaluation: Resize(data.val_resize_size) + CenterCrop(data.val_crop_size).
class SampleTransforms {
 public:
  SampleTransforms(const DataConfig& data, bool train);

  // The file's bytes (`path` names them in errors) decoded and transformed with the draws of `seed`'s generator. The
  // image returned owns its pixels.
  TransformedSample operator()(const std::string& path, const std::vector<uint8_t>& bytes, uint64_t seed) const;
  // Whether a device that decodes a file whole can apply every op of the list.
  bool runs_on_device() const;
  // The draws operator() makes for a file of height x width, as the device's parameters (runs_on_device() only).
  DeviceDraw draw_for_device(int64_t height, int64_t width, uint64_t seed) const;
  // The list in order: "RandomResizedCrop(224, bilinear) → RandomHorizontalFlip(p=0.5) → ...".
  std::string describe() const;
  // The decoder's options: data.max_image_pixels, and evaluation's reduced-size decode.
  const DecodeOptions& decode_options() const { return decode_; }

 private:
  bool train_;
  int64_t crop_size_, resize_size_;  // the crop the model sees; evaluation's Resize
  Interpolation interpolation_;
  DecodeOptions decode_;
  std::vector<std::unique_ptr<const PixelTransform>> ops_;
};

}  // namespace ddp
