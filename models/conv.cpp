// conv2d_forward: Conv2d's forward with ddptrain's kernel choices (channels-last layout, padding-only taps skipped).
#include "models/conv.h"

#include "app/config.h"

#include <torch/nn/functional/conv.h>

namespace ddp {

ConvKernels conv_kernels(const ModelConfig& cfg, bool channels_last_by_default) {
  ConvKernels k;
  k.channels_last = cfg.memory_format == "auto" ? channels_last_by_default : cfg.memory_format == "channels_last";
  k.skip_padding_taps = cfg.skip_padding_taps;
  return k;
}

LiveTaps live_taps(int64_t input, int64_t kernel, int64_t padding, int64_t stride, int64_t dilation) {
  const int64_t outputs = (input + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
  // Output o reads input o*stride - padding + k*dilation; tap k is live when that is inside [0, input) for some o.
  LiveTaps t{kernel, -1};
  for (int64_t k = 0; k < kernel; ++k) {
    const int64_t lowest = -padding + k * dilation;
    const int64_t highest = (outputs - 1) * stride - padding + k * dilation;
    // The outputs read inputs lowest, lowest+stride, ..., highest: is any of them in [0, input)?
    int64_t first_inside = lowest >= 0 ? lowest : lowest + ((-lowest + stride - 1) / stride) * stride;
    if (first_inside <= highest && first_inside < input) {
      t.first = std::min(t.first, k);
      t.last = std::max(t.last, k);
    }
  }
  return t;
}

namespace {

// The cropped kernel range and padding for one dimension, or false when cropping does not apply.
bool crop(int64_t input, int64_t kernel, int64_t padding, int64_t stride, int64_t dilation, LiveTaps* taps,
          int64_t* new_padding) {
  const int64_t outputs = (input + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
  if (outputs <= 0) return false;
  *taps = live_taps(input, kernel, padding, stride, dilation);
  if (taps->last < taps->first) return false;  // all taps read padding: leave it to ATen
  *new_padding = padding - taps->first * dilation;
  const int64_t new_kernel = taps->last - taps->first + 1;
  // Symmetric padding must still give the same number of outputs (the right edge only decides the count).
  const int64_t new_outputs = (input + 2 * *new_padding - dilation * (new_kernel - 1) - 1) / stride + 1;
  return *new_padding >= 0 && new_outputs == outputs;
}

// t in NHWC strides. Tensor::contiguous(ChannelsLast) keeps NCHW strides when they also satisfy the channels-last order
// (one channel), and oneDNN then picks its NCHW kernels: clone into true NHWC strides instead.
torch::Tensor nhwc(const torch::Tensor& t) {
  if (t.suggest_memory_format() == torch::MemoryFormat::ChannelsLast) return t;
  return t.clone(torch::MemoryFormat::ChannelsLast);
}

}  // namespace

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x, const ConvKernels& kernels) {
  const auto& o = conv.options;
  const auto* padding = c10::get_if<torch::ExpandingArray<2>>(&o.padding());
  if (!padding || !c10::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()) || x.dim() != 4)
    return conv.forward(x);

  torch::Tensor weight = conv.weight;
  std::vector<int64_t> pad = {(*padding)->at(0), (*padding)->at(1)};
  if (kernels.skip_padding_taps) {
    for (int d = 0; d < 2; ++d) {
      LiveTaps taps;
      int64_t new_padding = 0;
      if (!crop(x.size(2 + d), weight.size(2 + d), pad[d], o.stride()->at(d), o.dilation()->at(d), &taps, &new_padding))
        continue;
      if (taps.first == 0 && taps.last == weight.size(2 + d) - 1) continue;
      weight = weight.slice(2 + d, taps.first, taps.last + 1);
      pad[d] = new_padding;
    }
  }
  torch::Tensor input = x;
  if (kernels.channels_last) {
    weight = nhwc(weight);
    input = nhwc(x);
  }
  if (weight.is_same(conv.weight) && !kernels.channels_last) return conv.forward(x);
  return torch::conv2d(input, weight, conv.bias, *o.stride(), pad, *o.dilation(), o.groups());
}

}  // namespace ddp
