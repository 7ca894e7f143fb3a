// A sample's uint8 [C, H, W] pixels written into its row of a batch: copied, or normalised through a table; and
// v2.RandomErasing's box zeroed in a normalised row.
#pragma once

#include "config/config.h"
#include "data/image_transforms.h"

#include <torch/types.h>

#include <optional>
#include <vector>

namespace ddp {

// torchvision's ToTensor + Normalize of each uint8 value, (v / 255 - mean) / std in float32, as a table of the 256
// results per channel: the float32 operations of normalize_images, so the same bits.
class NormalizeTable {
 public:
  NormalizeTable(const PerChannel& mean, const PerChannel& std);
  // The values of channel c (the one row for all channels when mean and std have one value each).
  const float* channel(int64_t c) const { return values_.data() + (channels_ == 1 ? 0 : c) * 256; }
  int64_t channels() const { return channels_; }

 private:
  int64_t channels_;
  std::vector<float> values_;
};

// Writes the pixels of one sample (`sizes` [C, H, W], element `strides`) into row `row` of `batch` ([B, C, H, W], in
// any layout): a uint8 batch gets them as they are, a float32 one through `table`. Plain loops on the calling thread,
// no ATen operation.
void write_row(const torch::Tensor& batch, int64_t row, const uint8_t* pixels, c10::IntArrayRef sizes,
               c10::IntArrayRef strides, const NormalizeTable* table);

// A row's v2.RandomErasing box (value=0): every channel of the box is 0 after the normalisation.
struct RowErasure {
  int64_t row = 0;
  CropBox box;
};

// F.erase(batch[row], box, v=0) in place on a float32 batch (normalised), any layout: plain loops on the calling
// thread, as write_row. No box: nothing.
void erase_row(const torch::Tensor& batch, int64_t row, const std::optional<CropBox>& box);

// The same for each of `erasures` on a normalised batch on any device (after the DeviceFeed normalised it).
void erase_rows(const torch::Tensor& batch, const std::vector<RowErasure>& erasures);

}  // namespace ddp
