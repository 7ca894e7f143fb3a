// Batch rows: the three loops ordered by the batch's layout, the innermost writing contiguous memory; erased boxes.
#include "data/batch_rows.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace ddp {
namespace {

using Dims = std::array<int, 3>;

// The dimensions in the order of `strides`, largest first.
Dims by_stride(const int64_t* strides) {
  Dims d = {0, 1, 2};
  std::stable_sort(d.begin(), d.end(), [&](int a, int b) { return strides[a] > strides[b]; });
  return d;
}

// Elements laid out one after another without gaps in the order `d`.
bool dense(const int64_t* sizes, const int64_t* strides, const Dims& d) {
  return strides[d[2]] == 1 && strides[d[1]] == sizes[d[2]] && strides[d[0]] == sizes[d[1]] * sizes[d[2]];
}

// out = value(channel, in) over the image, the loops ordered by the output's strides (dimension 0 is the channel).
template <class Out, class Value>
void for_each_pixel(Out* out, const int64_t* os, const uint8_t* in, const int64_t* is, const int64_t* n, Value value) {
  if (n[0] == 3 && is[0] == 1 && is[2] == 3 && os[2] == 1) {
    // Interleaved RGB into planes (a resize's channels_last output into a channels-first batch): the input read
    // once, front to back, the three planes' rows written in step.
    for (int64_t y = 0; y < n[1]; ++y) {
      const uint8_t* src = in + y * is[1];
      Out* r = out + y * os[1];
      Out* g = r + os[0];
      Out* b = g + os[0];
      for (int64_t x = 0; x < n[2]; ++x, src += 3) {
        r[x] = value(0, src[0]);
        g[x] = value(1, src[1]);
        b[x] = value(2, src[2]);
      }
    }
    return;
  }
  const Dims d = by_stride(os);
  const int64_t inner = n[d[2]], o2 = os[d[2]], i2 = is[d[2]];
  int64_t at[3] = {0, 0, 0};
  for (at[d[0]] = 0; at[d[0]] < n[d[0]]; ++at[d[0]])
    for (at[d[1]] = 0; at[d[1]] < n[d[1]]; ++at[d[1]]) {
      const uint8_t* src = in + at[0] * is[0] + at[1] * is[1] + at[2] * is[2];
      Out* dst = out + at[0] * os[0] + at[1] * os[1] + at[2] * os[2];
      if (d[2] == 0) {  // the channel changes along the inner loop (channels_last)
        for (int64_t k = 0; k < inner; ++k) dst[k * o2] = value(k, src[k * i2]);
      } else {
        const int64_t c = at[0];
        for (int64_t k = 0; k < inner; ++k) dst[k * o2] = value(c, src[k * i2]);
      }
    }
}

}  // namespace

NormalizeTable::NormalizeTable(const PerChannel& mean, const PerChannel& std) {
  TORCH_CHECK(!mean.empty() && !std.empty(), "normalisation needs a mean and a std");
  TORCH_CHECK(mean.size() == std.size() || mean.size() == 1 || std.size() == 1, "normalisation: ", mean.size(),
              " mean values and ", std.size(), " std values");
  channels_ = static_cast<int64_t>(std::max(mean.size(), std.size()));
  values_.resize(static_cast<size_t>(channels_) * 256);
  for (int64_t c = 0; c < channels_; ++c) {
    const auto m = static_cast<float>(mean[mean.size() == 1 ? 0 : static_cast<size_t>(c)]);
    const auto s = static_cast<float>(std[std.size() == 1 ? 0 : static_cast<size_t>(c)]);
    for (int v = 0; v < 256; ++v) values_[static_cast<size_t>(c * 256 + v)] = (static_cast<float>(v) / 255.0f - m) / s;
  }
}

void write_row(const torch::Tensor& batch, int64_t row, const uint8_t* pixels, c10::IntArrayRef sizes,
               c10::IntArrayRef strides, const NormalizeTable* table) {
  TORCH_CHECK(batch.dim() == 4 && sizes.size() == 3 && batch.sizes().slice(1) == sizes, "a sample of ", sizes,
              " does not fit a batch of ", batch.sizes());
  const int64_t* n = sizes.data();
  const int64_t* is = strides.data();
  const int64_t* os = batch.strides().data() + 1;
  if (table) {
    TORCH_CHECK(table->channels() == 1 || table->channels() == n[0], "normalisation has ", table->channels(),
                " channels, the images ", n[0]);
    float* out = batch.data_ptr<float>() + row * batch.stride(0);
    for_each_pixel(out, os, pixels, is, n, [table](int64_t c, uint8_t v) { return table->channel(c)[v]; });
    return;
  }
  uint8_t* out = batch.data_ptr<uint8_t>() + row * batch.stride(0);
  const Dims d = by_stride(os);
  if (std::equal(is, is + 3, os) && dense(n, os, d)) {
    std::memcpy(out, pixels, static_cast<size_t>(n[0] * n[1] * n[2]));
    return;
  }
  for_each_pixel(out, os, pixels, is, n, [](int64_t, uint8_t v) { return v; });
}

void erase_row(const torch::Tensor& batch, int64_t row, const std::optional<CropBox>& box) {
  if (!box) return;
  TORCH_CHECK(batch.dim() == 4 && batch.scalar_type() == torch::kFloat32, "erasing needs a normalised batch, got ",
              batch.sizes(), " ", batch.scalar_type());
  TORCH_CHECK(box->top >= 0 && box->left >= 0 && box->top + box->height <= batch.size(2) &&
                  box->left + box->width <= batch.size(3),
              "an erased box outside the image");
  const int64_t* os = batch.strides().data() + 1;
  float* base = batch.data_ptr<float>() + row * batch.stride(0);
  for (int64_t c = 0; c < batch.size(1); ++c)
    for (int64_t y = box->top; y < box->top + box->height; ++y)
      for (int64_t x = box->left; x < box->left + box->width; ++x) base[c * os[0] + y * os[1] + x * os[2]] = 0.0f;
}

void erase_rows(const torch::Tensor& batch, const std::vector<RowErasure>& erasures) {
  for (const RowErasure& e : erasures)
    batch[e.row].slice(1, e.box.top, e.box.top + e.box.height).slice(2, e.box.left, e.box.left + e.box.width).zero_();
}

}  // namespace ddp
