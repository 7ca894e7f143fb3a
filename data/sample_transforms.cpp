// A class-folder split's transform list: the crop stage (decoding only what it needs), then the pixel ops in their
// rows' order.
#include "data/sample_transforms.h"

#include "config/config.h"

#include <ATen/CPUGeneratorImpl.h>

namespace ddp {
namespace {

// PILToTensor's layout: the HWC pixels viewed as [C, H, W].
torch::Tensor chw_view(const DecodedImage& decoded) {
  return torch::from_blob(const_cast<uint8_t*>(decoded.rgb.data()), {decoded.height, decoded.width, 3}, torch::kUInt8)
      .permute({2, 0, 1});
}

// `image` owning its pixels: a copy only where it is still a view of `decoded` (a resize to the size it already has, a
// crop, ops that changed nothing), whose pixels go with the transform that decoded them.
torch::Tensor owning(torch::Tensor image, const DecodedImage& decoded) {
  return image.storage().data() == decoded.rgb.data() ? image.clone() : image;
}

}  // namespace

const std::vector<const PixelTransformRow*>& pixel_transform_rows() {
#define DDP_LIST_PIXEL_TRANSFORM(NAME) &NAME##_transform(),
  static const std::vector<const PixelTransformRow*> rows{DDP_PIXEL_TRANSFORMS(DDP_LIST_PIXEL_TRANSFORM)};
#undef DDP_LIST_PIXEL_TRANSFORM
  return rows;
}

SampleTransforms::SampleTransforms(const DataConfig& data, bool train)
    : train_(train),
      crop_size_(train ? data.train_crop_size : data.val_crop_size),
      resize_size_(data.val_resize_size),
      interpolation_(data.interpolation) {
  decode_.max_pixels = data.max_image_pixels;
  // Evaluation: a JPEG whose 1/2, 1/4 or 1/8 scale still has a shorter side of at least twice the resize is decoded
  // at the smallest such scale (PIL's draft mode); it is resized to the size Resize gives the full image.
  if (!train_) decode_.min_side = 2 * resize_size_;
  if (train_)
    for (const PixelTransformRow* row : pixel_transform_rows())
      if (std::unique_ptr<const PixelTransform> op = row->make(data)) ops_.push_back(std::move(op));
}

TransformedSample SampleTransforms::operator()(const std::string& path, const std::vector<uint8_t>& bytes,
                                               uint64_t seed) const {
  if (!train_) {
    const DecodedImage decoded = decode_file_bytes(path, bytes, decode_);
    const auto [height, width] = shorter_side_size(decoded.full_height, decoded.full_width, resize_size_);
    return TransformedSample{
        owning(center_crop(resize_to(chw_view(decoded), height, width, interpolation_), crop_size_), decoded),
        std::nullopt};
  }
  // The crop is drawn from the full size in the header; a JPEG then decodes only the crop's region (and a crop much
  // larger than the output at 1/2, 1/4 or 1/8 scale, libjpeg's DCT scaling, so that the output is still a downscale
  // of at least its own size): fewer pixels through the inverse DCT, colour conversion and resize.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  CropBox box;
  DecodeOptions options = decode_;
  options.plan = [&](int64_t height, int64_t width) {
    box = random_resized_crop_box(height, width, CropRanges{}, gen);
    const unsigned scale = training_crop_scale(box, crop_size_);
    const CropBox region = scaled_box(box, scale, (height + scale - 1) / scale, (width + scale - 1) / scale);
    return DecodeRegion{scale, region.top, region.left, region.height, region.width};
  };
  const DecodedImage decoded = decode_file_bytes(path, bytes, options);
  CropBox at = scaled_box(box, decoded.scale, decoded.top + decoded.height, decoded.left + decoded.width);
  at.top -= decoded.top;
  at.left -= decoded.left;
  TransformedSample sample{
      resize_to(chw_view(decoded).slice(1, at.top, at.top + at.height).slice(2, at.left, at.left + at.width),
                crop_size_, crop_size_, interpolation_),
      std::nullopt};
  for (const auto& op : ops_) op->apply(sample, gen);
  sample.image = owning(std::move(sample.image), decoded);
  return sample;
}

bool SampleTransforms::runs_on_device() const {
  for (const auto& op : ops_)
    if (!op->runs_on_device()) return false;
  return true;
}

DeviceDraw SampleTransforms::draw_for_device(int64_t height, int64_t width, uint64_t seed) const {
  DeviceDraw draw;
  draw.transform.train = train_;
  draw.transform.size = crop_size_;
  draw.transform.resize = resize_size_;
  draw.transform.interpolation = interpolation_;
  if (!train_) return draw;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  draw.transform.crop = random_resized_crop_box(height, width, CropRanges{}, gen);
  for (const auto& op : ops_) op->draw_for_device(draw, crop_size_, gen);
  return draw;
}

std::string SampleTransforms::describe() const {
  const std::string mode = choice_name(interpolation_);
  if (!train_)
    return "Resize(" + std::to_string(resize_size_) + ", " + mode + ") → CenterCrop(" + std::to_string(crop_size_) +
           ")";
  std::string text = "RandomResizedCrop(" + std::to_string(crop_size_) + ", " + mode + ")";
  for (const auto& op : ops_) text += " → " + op->describe();
  return text;
}

}  // namespace ddp
