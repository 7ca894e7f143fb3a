// conv2d_forward: Conv2d's forward with ddptrain's kernel choices (channels-last layout, padding-only taps skipped).
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/types.h>

#include <string>

namespace ddp {

struct ModelConfig;

// How convolutions run; neither choice changes the module's parameters, names or state_dict.
struct ConvKernels {
  // Run the convolution in NHWC (the weight is converted on the fly, the input if it is not already): oneDNN's
  // channels-last kernels, and the pooling that follows them, are faster for small CNNs on CPU.
  bool channels_last = false;
  // Leave out kernel rows/columns that only ever read zero padding (a 3x3 kernel over a 1x1 feature map is a 1x1
  // kernel): the same sum without the zero terms. Their gradient is exactly zero either way.
  bool skip_padding_taps = true;
};

// Resolves model.memory_format ("auto" picks the model's measured default) and model.skip_padding_taps.
ConvKernels conv_kernels(const ModelConfig& cfg, bool channels_last_by_default);

// The kernel range [first, last] of one spatial dimension that reads at least one real input element.
struct LiveTaps {
  int64_t first = 0;
  int64_t last = 0;
};
LiveTaps live_taps(int64_t input, int64_t kernel, int64_t padding, int64_t stride, int64_t dilation);

// conv(x) computed with `kernels`; equal to conv->forward(x) up to floating-point summation order.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x, const ConvKernels& kernels);

// Stores every 4-D parameter of `model` in NHWC strides, as model.to(memory_format=torch.channels_last) does: the
// channels-last kernels then take the weights as they are (no per-step NHWC copy, and autocast's cast cache keeps
// one low-precision copy per weight), and the gradients follow the weights' strides. Values are unchanged.
void store_channels_last(torch::nn::Module& model);

}  // namespace ddp
