// conv2d_forward: Conv2d's forward with ddptrain's kernel choices (channels-last layout, padding-only taps skipped).
#include "models/conv.h"

#include "config/config.h"

#include <torch/autograd.h>
#include <torch/nn/functional/conv.h>

namespace ddp {

ConvKernels conv_kernels(const ModelConfig& cfg, bool channels_last_by_default) {
  ConvKernels k;
  k.channels_last = cfg.memory_format == MemoryFormat::Auto ? channels_last_by_default
                                                            : cfg.memory_format == MemoryFormat::ChannelsLast;
  k.skip_padding_taps = cfg.skip_padding_taps;
  return k;
}

namespace {

// Conv2d's output count along one dimension, floor((input + 2 padding - dilation (kernel - 1) - 1) / stride) + 1 (a
// negative span floors, as PyTorch's shape rule does: 0 or fewer outputs).
int64_t conv_outputs(int64_t input, int64_t kernel, int64_t padding, int64_t stride, int64_t dilation) {
  const int64_t span = input + 2 * padding - dilation * (kernel - 1) - 1;
  return (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
}

}  // namespace

LiveTaps live_taps(int64_t input, int64_t kernel, int64_t padding, int64_t stride, int64_t dilation) {
  const int64_t outputs = conv_outputs(input, kernel, padding, stride, dilation);
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
  const int64_t outputs = conv_outputs(input, kernel, padding, stride, dilation);
  if (outputs <= 0) return false;
  *taps = live_taps(input, kernel, padding, stride, dilation);
  if (taps->last < taps->first) return false;  // all taps read padding: leave it to ATen
  *new_padding = padding - taps->first * dilation;
  const int64_t new_kernel = taps->last - taps->first + 1;
  // Symmetric padding must still give the same number of outputs (the right edge only decides the count).
  const int64_t new_outputs = conv_outputs(input, new_kernel, *new_padding, stride, dilation);
  return *new_padding >= 0 && new_outputs == outputs;
}

// t in NHWC strides. Tensor::contiguous(ChannelsLast) keeps NCHW strides when they also satisfy the channels-last order
// (one channel), and oneDNN then picks its NCHW kernels: clone into true NHWC strides instead.
torch::Tensor nhwc(const torch::Tensor& t) {
  if (t.suggest_memory_format() == torch::MemoryFormat::ChannelsLast) return t;
  return t.clone(torch::MemoryFormat::ChannelsLast);
}

// The live taps of a kernel (a view, as a slice would be), whose backward adds its gradient straight into the live
// taps of the weight's existing gradient (a micro-batch after the first under gradient accumulation, or gradients
// zeroed in place). A plain slice's backward would build a full-size gradient of zeros first (9 MiB for each 3x3
// 512x512 kernel of ResNet-18's layer4, at the peak of memory: backward begins there) for the weight's AccumulateGrad
// to add. The sum is the same element by element; the padding taps' gradient stays what it was. AccumulateGrad, which
// then receives no gradient, still runs its post hooks (DDP's Reducer marks the weight ready and reads its gradient).
// Where the gradient cannot take the sum in place (none yet, after zero_grad's set_to_none; a zero-strided or
// differently typed one, or create_graph), the full-size gradient goes to AccumulateGrad as usual, laid out like the
// weight so that AccumulateGrad keeps it as the weight's gradient without a copy.
struct LiveTapsOf : torch::autograd::Function<LiveTapsOf> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               std::vector<int64_t> first, std::vector<int64_t> last) {
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["first"] = first;
    ctx->saved_data["last"] = last;
    return live_part(weight, first, last);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    torch::Tensor weight = ctx->saved_data["weight"].toTensor();
    const auto first = ctx->saved_data["first"].toIntVector();
    const auto last = ctx->saved_data["last"].toIntVector();
    const torch::Tensor& grad = grads[0];
    torch::Tensor& existing = weight.mutable_grad();
    torch::autograd::variable_list out(3);
    if (!grad.defined()) return out;
    if (!torch::GradMode::is_enabled() && existing.defined() && existing.layout() == torch::kStrided &&
        existing.scalar_type() == grad.scalar_type() && existing.device() == grad.device() &&
        !existing.requires_grad() && existing.is_non_overlapping_and_dense()) {
      live_part(existing, first, last).add_(grad);
      return out;
    }
    out[0] = torch::zeros_like(weight);
    live_part(out[0], first, last).copy_(grad);
    return out;
  }

  static torch::Tensor live_part(const torch::Tensor& w, const std::vector<int64_t>& first,
                                 const std::vector<int64_t>& last) {
    return w.slice(2, first[0], last[0] + 1).slice(3, first[1], last[1] + 1);
  }
};

}  // namespace

void store_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters())
    if (p.dim() == 4) p.set_data(nhwc(p.data()));
}

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x, const ConvKernels& kernels) {
  const auto& o = conv.options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  if (!padding || !std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()) || x.dim() != 4)
    return conv.forward(x);

  torch::Tensor weight = conv.weight;
  std::vector<int64_t> pad = {(*padding)->at(0), (*padding)->at(1)};
  if (kernels.skip_padding_taps) {
    std::vector<int64_t> first = {0, 0}, last = {weight.size(2) - 1, weight.size(3) - 1};
    bool cropped = false;
    for (int d = 0; d < 2; ++d) {
      LiveTaps taps;
      int64_t new_padding = 0;
      if (!crop(x.size(2 + d), weight.size(2 + d), pad[d], o.stride()->at(d), o.dilation()->at(d), &taps, &new_padding))
        continue;
      if (taps.first == 0 && taps.last == weight.size(2 + d) - 1) continue;
      first[d] = taps.first;
      last[d] = taps.last;
      pad[d] = new_padding;
      cropped = true;
    }
    if (cropped) weight = LiveTapsOf::apply(conv.weight, first, last);
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
