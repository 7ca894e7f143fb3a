// torchvision.transforms.v2's Resize, CenterCrop, RandomResizedCrop and RandomHorizontalFlip on uint8 [C, H, W] tensors
// (torchvision/transforms/v2/functional/_geometry.py and v2/_geometry.py), through the same ATen kernels; the flip's
// row.
#include "data/image_transforms.h"

#include "config/config.h"
#include "data/sample_key.h"
#include "data/sample_transforms.h"

#include <ATen/Version.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace ddp {
namespace {

// torchvision resizes uint8 natively only where ATen's vectorised uint8 kernel exists (_do_native_uint8_resize_on_cpu).
bool native_uint8_resize() {
  static const bool native = [] {
    const std::string capability = at::get_cpu_capability();
    return capability == "AVX2" || capability == "AVX512";
  }();
  return native;
}

// F.interpolate(x, size, mode, align_corners=False, antialias=True) for bilinear and bicubic.
torch::Tensor antialiased_resize(const torch::Tensor& x, int64_t height, int64_t width, Interpolation mode) {
  const std::array<int64_t, 2> sizes{height, width};
  const c10::IntArrayRef size(sizes);
  return mode == Interpolation::Bicubic ? at::_upsample_bicubic2d_aa(x, size, /*align_corners=*/false, std::nullopt)
                                        : at::_upsample_bilinear2d_aa(x, size, /*align_corners=*/false, std::nullopt);
}

// antialiased_resize into `out`, whose sizes and layout are kept.
void antialiased_resize_out(torch::Tensor& out, const torch::Tensor& x, Interpolation mode) {
  const c10::IntArrayRef size = out.sizes().slice(2);
  if (mode == Interpolation::Bicubic)
    at::_upsample_bicubic2d_aa_out(out, x, size, /*align_corners=*/false, std::nullopt);
  else
    at::_upsample_bilinear2d_aa_out(out, x, size, /*align_corners=*/false, std::nullopt);
}

// Python's int(round(x)): to the nearest integer, halves to even.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

torch::Tensor resize_to(const torch::Tensor& image, int64_t height, int64_t width, Interpolation mode) {
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  if (height == h && width == w) return image;
  torch::Tensor x = image.reshape({1, c, h, w});
  // resize_image restrides a channels_last single image so the kernel keeps channels_last (pytorch/pytorch#68430);
  // the same strides here give the kernel the same input.
  if (x.is_contiguous(at::MemoryFormat::ChannelsLast) && x.stride(0) != x.numel())
    x = x.as_strided({1, c, h, w}, {x.numel(), x.stride(1), x.stride(2), x.stride(3)});
  if (x.scalar_type() == torch::kUInt8 && (c == 3 || c == 4) && native_uint8_resize()) {
    // ATen's vectorised uint8 kernel computes 3 or 4 channels interleaved: an output in channels_last receives them
    // as they are, any other layout costs a scalar repacking pass over the output (pack_rgb). The same values.
    torch::Tensor out = torch::empty({1, c, height, width}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    antialiased_resize_out(out, x, mode);
    return out.reshape({c, height, width});
  }
  const bool cast = mode == Interpolation::Bilinear && !native_uint8_resize();
  if (cast) x = x.to(torch::kFloat32);
  x = antialiased_resize(x, height, width, mode);
  if (cast) x = x.round_().to(torch::kUInt8);
  return x.reshape({c, height, width});
}

std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size) {
  // _compute_resized_output_size: the longer side is int(size * long / short), a true division then truncated.
  const int64_t shorter = std::min(width, height), longer = std::max(width, height);
  const auto other = static_cast<int64_t>(static_cast<double>(size * longer) / static_cast<double>(shorter));
  return width <= height ? std::pair{other, size} : std::pair{size, other};
}

torch::Tensor resize_shorter_side(const torch::Tensor& image, int64_t size, Interpolation mode) {
  const auto [height, width] = shorter_side_size(image.size(1), image.size(2), size);
  return resize_to(image, height, width, mode);
}

torch::Tensor apply_device_transform(const torch::Tensor& image, const DeviceTransform& t) {
  auto resized = [mode = t.interpolation](const torch::Tensor& x, int64_t height, int64_t width) {
    const int64_t c = x.size(0), h = x.size(1), w = x.size(2);
    torch::Tensor f = x.reshape({1, c, h, w}).to(torch::kFloat32);
    if (height != h || width != w) {
      f = antialiased_resize(f, height, width, mode);
      if (mode == Interpolation::Bicubic) f.clamp_(0, 255);  // resize_image: bicubic overshoots the uint8 range
    }
    return f.reshape({c, height, width});
  };
  torch::Tensor out;
  if (t.train) {
    const CropBox& b = t.crop;
    out = resized(image.slice(1, b.top, b.top + b.height).slice(2, b.left, b.left + b.width), t.size, t.size);
  } else {
    const auto [height, width] = shorter_side_size(image.size(1), image.size(2), t.resize);
    out = center_crop(resized(image, height, width), t.size);
  }
  return t.flip ? out.flip(-1) : out;
}

torch::Tensor center_crop(const torch::Tensor& image, int64_t size) {
  const int64_t h = image.size(1), w = image.size(2);
  if (h < size || w < size)
    throw std::invalid_argument("center_crop: a " + std::to_string(h) + "x" + std::to_string(w) +
                                " image is smaller than the crop of " + std::to_string(size));
  const int64_t top = round_half_even((h - size) / 2.0), left = round_half_even((w - size) / 2.0);
  return image.slice(1, top, top + size).slice(2, left, left + size);
}

CropBox random_resized_crop_box(int64_t height, int64_t width, const CropRanges& ranges, at::Generator& gen) {
  const int64_t area = height * width;
  // torch.log(torch.tensor(ratio)): float32, as the bounds of the float32 draw below.
  const torch::Tensor log_ratio = torch::log(torch::tensor({ranges.ratio_min, ranges.ratio_max}, torch::kFloat32));
  const double log_lo = log_ratio[0].item<double>(), log_hi = log_ratio[1].item<double>();
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area =
        static_cast<double>(area) *
        torch::empty({1}, torch::kFloat32).uniform_(ranges.scale_min, ranges.scale_max, gen).item<double>();
    const double aspect = torch::empty({1}, torch::kFloat32).uniform_(log_lo, log_hi, gen).exp().item<double>();
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = torch::randint(0, height - h + 1, {1}, gen, torch::kInt64).item<int64_t>();
      const int64_t left = torch::randint(0, width - w + 1, {1}, gen, torch::kInt64).item<int64_t>();
      return {top, left, h, w};
    }
  }
  // Fallback: the central crop, clamped to the ratio range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ranges.ratio_min)
    h = round_half_even(static_cast<double>(w) / ranges.ratio_min);
  else if (in_ratio > ranges.ratio_max)
    w = round_half_even(static_cast<double>(h) * ranges.ratio_max);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

unsigned training_crop_scale(const CropBox& box, int64_t size) {
  for (unsigned d : {8u, 4u, 2u})
    if (std::min(box.height, box.width) / d >= size) return d;
  return 1;
}

CropBox scaled_box(const CropBox& box, unsigned scale, int64_t height, int64_t width) {
  const int64_t d = scale;
  const int64_t top = std::min(box.top / d, height - 1), left = std::min(box.left / d, width - 1);
  const int64_t bottom = std::clamp((box.top + box.height + d - 1) / d, top + 1, height);
  const int64_t right = std::clamp((box.left + box.width + d - 1) / d, left + 1, width);
  return {top, left, bottom - top, right - left};
}

bool random_flip(at::Generator& gen) { return torch::rand({1}, gen, torch::kFloat32).item<float>() < 0.5f; }

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) { return sample_key(seed, epoch, index); }

namespace {

// v2.RandomHorizontalFlip(p=0.5): the training split's, always after the crop.
class HorizontalFlipTransform : public PixelTransform {
 public:
  std::string describe() const override { return "RandomHorizontalFlip(p=0.5)"; }
  void apply(TransformedSample& sample, at::Generator& gen) const override {
    if (random_flip(gen)) sample.image = sample.image.flip(-1);
  }
  bool runs_on_device() const override { return true; }
  void draw_for_device(DeviceDraw& draw, int64_t /*size*/, at::Generator& gen) const override {
    draw.transform.flip = random_flip(gen);
  }
};

}  // namespace

const PixelTransformRow& horizontal_flip_transform() {
  static const PixelTransformRow row{"horizontal_flip", [](const DataConfig&) -> std::unique_ptr<const PixelTransform> {
                                       return std::make_unique<HorizontalFlipTransform>();
                                     }};
  return row;
}

}  // namespace ddp
