// torchvision's Conv2dNormActivation, SqueezeExcitation and _make_divisible, the shared conv/BatchNorm init.
#include "models/torchvision_blocks.h"

#include "config/config.h"

#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <stdexcept>

namespace ddp {

namespace nn = torch::nn;

ModelRow torchvision_cnn_row(std::string_view name, std::string_view torchvision, double dropout,
                             double stochastic_depth) {
  return {name,
          torchvision,
          "torchvision's MobileNetV3-Large, EfficientNetV2-S and RegNetY-1.6GF",
          /*batch_norm=*/true,
          /*cuda_graph=*/true,
          /*head_known=*/true,
          /*path=*/"",
          dropout,
          stochastic_depth};
}

int64_t make_divisible(double v, int64_t divisor, int64_t min_value) {
  if (min_value == 0) min_value = divisor;
  int64_t new_v = std::max(min_value, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (new_v < 0.9 * v) new_v += divisor;  // round down by no more than 10%
  return new_v;
}

torch::Tensor activate(const torch::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::None:
      return x;
    case Activation::ReLU:
      return torch::relu(x);
    case Activation::SiLU:
      return torch::silu(x);
    case Activation::Hardswish:
      return torch::hardswish(x);
    case Activation::Hardsigmoid:
      return torch::hardsigmoid(x);
    case Activation::Sigmoid:
      return torch::sigmoid(x);
  }
  throw std::logic_error("activate: unknown activation");
}

void BlockSequence::add(std::shared_ptr<FeatureBlock> block, std::string name) {
  if (name.empty()) name = std::to_string(blocks_.size());
  blocks_.push_back(register_module(name, std::move(block)));
}

torch::Tensor BlockSequence::forward(const torch::Tensor& x) {
  torch::Tensor y = x;
  for (auto& block : blocks_) y = block->forward(y);
  return y;
}

ConvNormActivation::ConvNormActivation(const BlockContext& ctx, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                       int64_t groups, Activation activation)
    : activation_(activation), kernels_(ctx.kernels), bn_layers_(ctx.bn_layers) {
  conv_ = register_module(
      "0", nn::Conv2d(
               nn::Conv2dOptions(in, out, kernel).stride(stride).padding((kernel - 1) / 2).groups(groups).bias(false)));
  bn_ = register_module("1", nn::BatchNorm2d(nn::BatchNorm2dOptions(out).eps(ctx.bn_eps).momentum(ctx.bn_momentum)));
}

torch::Tensor ConvNormActivation::forward(const torch::Tensor& x) {
  return activate(bn_layers_->forward(*bn_, conv2d_forward(*conv_, x, kernels_)), activation_);
}

SqueezeExcitation::SqueezeExcitation(const BlockContext& ctx, int64_t channels, int64_t squeeze_channels,
                                     Activation activation, Activation scale_activation)
    : activation_(activation), scale_activation_(scale_activation), kernels_(ctx.kernels) {
  fc1_ = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(channels, squeeze_channels, 1)));
  fc2_ = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(squeeze_channels, channels, 1)));
}

torch::Tensor SqueezeExcitation::forward(const torch::Tensor& x) {
  torch::Tensor scale = torch::adaptive_avg_pool2d(x, {1, 1});
  scale = activate(conv2d_forward(*fc1_, scale, kernels_), activation_);
  scale = activate(conv2d_forward(*fc2_, scale, kernels_), scale_activation_);
  return scale * x;  // torchvision: scale * input
}

void init_convs_and_norms(nn::Module& model, bool zero_conv_bias) {
  for (auto& m : model.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (zero_conv_bias && conv->bias.defined()) nn::init::zeros_(conv->bias);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
}

TorchvisionCnn::TorchvisionCnn(const ModelConfig& cfg, double bn_eps, double bn_momentum) {
  ctx_.kernels = conv_kernels(cfg, /*channels_last_by_default=*/false);
  ctx_.bn_eps = bn_eps;
  ctx_.bn_momentum = bn_momentum;
}

void TorchvisionCnn::synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& collectives) {
  ctx_.bn_layers->synchronize(collectives);
}

int64_t TorchvisionCnn::min_training_batch(int64_t image_size) const {
  int64_t s = image_size;
  for (int stage = 0; stage < 5; ++stage) s = (s + 1) / 2;
  return s * s > 1 ? 1 : 2;
}

torch::Tensor FeaturesThenClassifier::forward(torch::Tensor x) {
  return classifier_->forward(torch::flatten(torch::adaptive_avg_pool2d(features_->forward(x), {1, 1}), 1));
}

void FeaturesThenClassifier::register_parts(std::shared_ptr<BlockSequence> features, nn::Sequential classifier) {
  features_ = register_module("features", std::move(features));
  classifier_ = register_module("classifier", std::move(classifier));
}

}  // namespace ddp
